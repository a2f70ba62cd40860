"""Slurm hostlist expressions: ``n[001-004,007],gpu1`` ⇄ node names.

Syntax (Slurm's ``hostlist_create``, ``scontrol show hostnames``): items separated by
commas, spaces or tabs outside brackets (empty items, as in ``,1,2,3`` or ``n1, n2``,
are skipped); an item is text with any number of bracket groups, each a
comma-separated list of numbers or ``lo-hi`` ranges; zero padding is kept
(``n[08-10]`` → ``n08 n09 n10``).  Unlike Slurm, duplicates are kept once.
Several groups expand as a cartesian product (``r[1-2]n[1-2]``).  Bad syntax raises
:class:`~hpcguard.connectors.errors.ParseError` (kind ``bad_hostlist``); expansions
larger than ``limit`` names are refused.

Example
-------
>>> expand_hostlist("n[001-003,007],gpu1")
['n001', 'n002', 'n003', 'n007', 'gpu1']
>>> expand_hostlist(",1,2, 3")
['1', '2', '3']
>>> compress_hostlist(["n001", "n002", "n003", "n007", "gpu1"])
'gpu1,n[001-003,007]'
"""
from __future__ import annotations

import itertools
import re
from typing import Iterable

from hpcguard.connectors.errors import ParseError

MAX_HOSTS = 65536
_SEPARATORS = ", \t"  # Slurm's hostlist_create splits on comma, space and tab
_TEXT = re.compile(r"[A-Za-z0-9_.\-]*")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def _split_items(expr: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ParseError("bad_hostlist", f"nested '[' at position {i} in {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ParseError("bad_hostlist", f"unmatched ']' at position {i} in {expr!r}")
        elif ch in _SEPARATORS and depth == 0:
            items.append(expr[start:i])
            start = i + 1
    if depth:
        raise ParseError("bad_hostlist", f"unclosed '[' in {expr!r}")
    items.append(expr[start:])
    return [item for item in items if item]  # Slurm skips empty tokens (",1,2", "n1, n2")


def _expand_group(group: str, expr: str, limit: int) -> list[str]:
    out: list[str] = []
    for part in group.split(","):
        m = _RANGE.fullmatch(part.strip())
        if m is None:
            raise ParseError("bad_hostlist", f"bad range {part!r} in {expr!r}")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ParseError("bad_hostlist", f"descending range {part!r} in {expr!r}")
        if len(out) + hi - lo + 1 > limit:
            raise ParseError("bad_hostlist", f"{expr!r} expands to more than {limit} names")
        width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def expand_hostlist(expr: str, limit: int = MAX_HOSTS) -> list[str]:
    """Node names of a hostlist expression, in expression order (duplicates kept once).

    ``""``, ``"None assigned"`` and ``"(null)"`` (what sacct prints for jobs without
    nodes) give ``[]``.
    """
    if not isinstance(expr, str):
        raise ParseError("bad_hostlist", f"hostlist must be a string, got {type(expr).__name__}")
    expr = expr.strip()
    if expr in ("", "None assigned", "(null)"):
        return []
    names: list[str] = []
    for item in _split_items(expr):
        pieces: list[list[str]] = []
        pos = 0
        while pos < len(item):
            if item[pos] == "[":
                end = item.index("]", pos)
                pieces.append(_expand_group(item[pos + 1:end], expr, limit))
                pos = end + 1
            else:
                m = _TEXT.match(item, pos)
                if m is None or m.end() == pos:
                    raise ParseError("bad_hostlist", f"bad character {item[pos]!r} in {expr!r}")
                pieces.append([m.group(0)])
                pos = m.end()
        count = 1
        for p in pieces:
            count *= len(p)
        if len(names) + count > limit:
            raise ParseError("bad_hostlist", f"{expr!r} expands to more than {limit} names")
        names.extend("".join(combo) for combo in itertools.product(*pieces))
    return list(dict.fromkeys(names))


def compress_hostlist(names: Iterable[str]) -> str:
    """A compact hostlist expression for ``names`` (sorted by prefix, then number).

    Numbers of different zero-padded widths are kept in separate groups so that
    ``expand_hostlist(compress_hostlist(x))`` gives back the same set of names.
    """
    groups: dict[tuple[str, int], set[int]] = {}
    plain: set[str] = set()
    unpadded: list[tuple[str, str]] = []
    for name in names:
        m = _TRAILING_NUMBER.match(name)
        if m is None:
            plain.add(name)
            continue
        prefix, digits = m.group(1), m.group(2)
        if digits.startswith("0") and len(digits) > 1:
            groups.setdefault((prefix, len(digits)), set()).add(int(digits))
        else:
            unpadded.append((prefix, digits))
    for prefix, digits in unpadded:  # "n100" joins "n098"'s width-3 group: zfill(3) keeps it unchanged
        width = len(digits) if (prefix, len(digits)) in groups else 0
        groups.setdefault((prefix, width), set()).add(int(digits))
    parts = [(n, n) for n in plain]
    for (prefix, width), numbers in groups.items():
        nums = sorted(numbers)
        if len(nums) == 1:
            text = f"{prefix}{str(nums[0]).zfill(width)}"
            parts.append((text, text))
            continue
        ranges, lo = [], nums[0]
        for prev, cur in zip(nums, nums[1:] + [None]):
            if cur is None or cur != prev + 1:
                a, b = str(lo).zfill(width), str(prev).zfill(width)
                ranges.append(a if lo == prev else f"{a}-{b}")
                lo = cur
        text = f"{prefix}[{','.join(ranges)}]"
        parts.append((f"{prefix}{str(nums[0]).zfill(width)}", text))
    return ",".join(text for _, text in sorted(parts))
