"""Per-node ``ipmitool sdr`` logs with timestamp lines (the FASRC layout), fast, and straight from an archive.

Harvard FASRC's IPMI day (``../shared/data/fasrc-ipmi/``) is one file per node,
``<host>-YYYY-MM-DD.txt``: a ``Timestamp: 2025-06-03 00:00:01 UTC`` line, then the
``ipmitool sdr`` output, once a minute.  :func:`scan_sdr_log` turns one such log into
reduced canonical values per poll with the same row parser, unit check and reducer as
the per-poll decoder (:func:`hpcguard.connectors.ipmi.decode_ipmi_envelope`), but
classifies each distinct line once (BMC lines repeat poll after poll): the FASRC day
(1,724 nodes, 62.6 M sensor lines) takes about 40 CPU seconds, xz decompression included
(``benchmarks/bench_fasrc.py``).  :func:`iter_archive_logs` streams the logs
out of a ``.tar.xz`` / ``.tar.gz`` / ``.tar`` without extracting it;
:func:`buffer_archive_polls` keeps every answered poll of an archive compactly (each
distinct line once, a poll as a run of line ids) so that replay can publish the polls of
all nodes in time order.

Example
-------
>>> text = ("Timestamp: 2025-06-03 00:00:01 UTC\\nCPU 1 Temp | 31 degrees C | ok\\nFan 1 | 0x00 | ok\\n"
...         "Timestamp: 2025-06-03 00:01:01 UTC\\nCPU 1 Temp | 33 degrees C | ok\\nFan 1 | 0x00 | ok\\n")
>>> scan = scan_sdr_log(text, "n1", SdrLineCache(SensorMapping.load()))
>>> scan.times.tolist(), scan.values.tolist(), scan.sensor.tolist(), scan.lines
([1748908801.0, 1748908861.0], [31.0, 33.0], [0, 0], 4)
"""
from __future__ import annotations

import tarfile
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.ipmi import (POLL, IpmiInput, TimeLine, classify_reading, host_from_filename,
                                      parse_sdr_row, read_ipmi_lines, reduce_polls)
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.models.features import CANONICAL_SENSORS

if TYPE_CHECKING:
    from hpcguard.connectors.coverage import SensorCoverage

ARCHIVE_SUFFIXES = (".tar", ".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar.bz2")
# distinct lines kept: BMC lines repeat (a day of 1,724 FASRC nodes has far fewer), but lines
# with noisy readings (a simulator's FreeIPMI floats) do not, so a long run starts afresh
MAX_CACHED_LINES = 500_000
_SENSOR = {name: i for i, name in enumerate(CANONICAL_SENSORS)}
BLANK, TIME, ROW, BAD, BAD_TIME = 0, 1, 2, 3, 4  # kinds of distinct lines
VERDICTS = ("used", "unmapped", "missing", "unit_mismatch")


def is_archive(path: str | Path) -> bool:
    """Whether ``path`` names a tar archive this module streams."""
    return str(path).endswith(ARCHIVE_SUFFIXES)


class SdrLineCache:
    """Every distinct log line classified once: kind, time, sensor, priority, value, verdict, name, unit.

    Shared across the nodes of one run (nodes of one BMC family print the same lines).
    ``row_parser`` turns a line into ``(name, value, unit, status)`` or ``None`` (default:
    :func:`~hpcguard.connectors.ipmi.parse_sdr_row`); a ``# hpcguard-poll`` line or a
    ``time_line`` starts a poll.
    """

    def __init__(self, mapping: SensorMapping, time_line: TimeLine | None = None,
                 row_parser: Callable[[str], tuple | None] = parse_sdr_row, skip: Callable[[str], bool] | None = None,
                 max_lines: int = MAX_CACHED_LINES):
        self.mapping = mapping
        self.time_line = time_line or TimeLine()
        self.row_parser = row_parser
        self.skip = skip or (lambda line: False)
        self.max_lines = max_lines
        self.clear()

    def clear(self) -> None:
        """Forget every line (ids of earlier scans become invalid)."""
        self.hosts: list[str | None] = [None]  # poll hosts named by '# hpcguard-poll' lines (id 0: none)
        self.ids: dict[str, int] = {}
        self.info: list[tuple] = []  # (name, unit, canonical, verdict, error kind, reason) per id
        self._cols: list[list] = [[], [], [], [], [], [], []]  # kind, time, sensor, priority, value, verdict, host
        i8, f8 = np.zeros(0, np.int64), np.zeros(0)
        self.kind, self.time, self.sensor, self.priority = i8, f8, i8, i8
        self.value, self.verdict, self.host = f8, i8, i8

    def add(self, line: str) -> int:
        """Id of a line not seen before."""
        name = unit = canonical = reason = error = None
        kind, t, sensor, priority, value, verdict, host = BLANK, np.nan, -1, -1, np.nan, -1, 0
        s = line.strip()
        poll = POLL.match(s) if s.startswith("#") else None
        if poll is not None:
            try:
                t = float(poll.group(2))
                if not np.isfinite(t):
                    raise ValueError
                kind, host = TIME, len(self.hosts)
                self.hosts.append(poll.group(1))
            except ValueError:
                kind, error, reason = BAD_TIME, "bad_time", f"poll time {poll.group(2)!r} is not a number"
        elif s and not s.startswith("#") and not self.skip(s):
            try:
                stamp = self.time_line.parse(s)
            except ParseError as exc:
                stamp, kind, reason, error = None, BAD_TIME, exc.reason, exc.kind
            if stamp is not None:
                kind, t = TIME, stamp
            elif kind != BAD_TIME:
                try:
                    row = self.row_parser(line)
                except ParseError as exc:
                    row, kind, error, reason = None, BAD, exc.kind, exc.reason
                if kind == BAD:
                    pass
                elif row is None:
                    kind, error, reason = BAD, "bad_row", "not a sensor row of this file's format nor a poll line"
                else:
                    name, v, unit, _ = row
                    canonical, priority, word = classify_reading(name, v, unit, self.mapping)
                    kind, verdict = ROW, VERDICTS.index(word)
                    sensor = _SENSOR[canonical] if canonical is not None else -1
                    value = v if word == "used" else np.nan
        i = len(self.info)
        self.ids[line] = i
        self.info.append((name, unit, canonical, verdict, error, reason))
        for col, x in zip(self._cols, (kind, t, sensor, priority, value, verdict, host)):
            col.append(x)
        return i

    def arrays(self) -> None:
        """Bring the numpy views up to date with the lines added since the last call."""
        n = len(self.info)
        if self.kind.size == n:
            return
        k = self.kind.size
        new = [np.asarray(c[k:]) for c in self._cols]
        old = (self.kind, self.time, self.sensor, self.priority, self.value, self.verdict, self.host)
        self.kind, self.time, self.sensor, self.priority, self.value, self.verdict, self.host = (
            np.concatenate([o, a.astype(o.dtype)]) for o, a in zip(old, new))


@dataclass
class SdrLogScan:
    """One node's log: poll times, reduced canonical values per poll, line counts, rejected lines."""

    node: str
    times: np.ndarray  # poll start times
    hosts: list[str]  # node of every poll (the file's node unless a '# hpcguard-poll' line names one)
    poll: np.ndarray  # (poll index, sensor index, value) of every reduced value
    sensor: np.ndarray
    values: np.ndarray
    lines: int  # sensor rows read
    raw_counts: dict[int, int] = field(default_factory=dict)  # line-cache id → occurrences
    rejected: list[Rejected] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)  # readings by verdict


def scan_sdr_log(text: str, node: str, cache: SdrLineCache, source: str = "", untimed_at: float | None = None
                 ) -> SdrLogScan:
    """Scan one node's ``ipmitool sdr`` log (timestamp line, rows, timestamp line, ...).

    Rows before the first poll line are rejected, or form a poll at ``untimed_at``; so
    are rows after a poll line with a bad time.  A poll holding a malformed row is
    refused whole (as :func:`~hpcguard.connectors.ipmi.decode_ipmi_envelope` refuses
    it), with one rejection per malformed line.
    """
    lines = text.split("\n")
    if len(cache.info) > cache.max_lines:
        cache.clear()
    get = cache.ids.get
    ids = [get(line, -1) for line in lines]
    for i in [i for i, x in enumerate(ids) if x < 0]:  # first sight of a line
        ids[i] = get(lines[i], -1)
        if ids[i] < 0:
            ids[i] = cache.add(lines[i])
    cache.arrays()
    idx = np.asarray(ids, dtype=np.int64)
    kind = cache.kind[idx]
    starts = (kind == TIME) | (kind == BAD_TIME)
    poll = np.cumsum(starts) - 1  # poll index of every line (-1: before the first poll line)
    timed = kind[starts] == TIME  # per poll: its line gave a time
    times, host_ids = cache.time[idx[starts]], cache.host[idx[starts]]
    rows, bad = kind == ROW, kind == BAD
    if untimed_at is not None and (rows & (poll < 0)).any():  # the rows before any poll line become one poll
        poll, timed = poll + 1, np.concatenate([[True], timed])
        times, host_ids = np.concatenate([[float(untimed_at)], times]), np.concatenate([[0], host_ids])

    def per_line(flags: np.ndarray) -> np.ndarray:  # a per-poll flag on every line (False before the first poll)
        return np.concatenate([[False], flags])[poll + 1]

    orphan = rows & ~per_line(timed)
    keep = timed.copy()
    keep[poll[bad & (poll >= 0)]] = False  # a poll with a malformed row is refused whole (as by the decoder)
    rows &= per_line(keep)
    rejected = [Rejected(source, int(i) + 1, "missing_field", "sensor row outside a poll block (no valid poll or "
                         "timestamp line before it)", lines[i]) for i in np.flatnonzero(orphan)]
    rejected += [Rejected(source, int(i) + 1, cache.info[idx[i]][4], cache.info[idx[i]][5], lines[i])
                 for i in np.flatnonzero(bad | (kind == BAD_TIME))]
    renumber = np.cumsum(keep) - 1
    verdict = cache.verdict[idx[rows]]
    stats = {VERDICTS[v]: int(n) for v, n in enumerate(np.bincount(verdict, minlength=4)) if n}
    used = rows & (cache.verdict[idx] == 0)
    u = idx[used]
    p, s, v = reduce_polls(renumber[poll[used]], cache.sensor[u], cache.priority[u], cache.value[u], cache.mapping)
    uniq, counts = np.unique(idx[rows], return_counts=True)
    return SdrLogScan(node=node, times=times[keep], hosts=[cache.hosts[h] or node for h in host_ids[keep].tolist()],
                      poll=p, sensor=s, values=v, lines=int(rows.sum()),
                      raw_counts=dict(zip(uniq.tolist(), counts.tolist())), rejected=rejected, stats=stats)


def add_scan_coverage(scan: SdrLogScan, cache: SdrLineCache, coverage: "SensorCoverage") -> None:
    """Record a node's raw names, its BMC family and its polls (node-steps) with a value per sensor."""
    add_scan_names(scan, cache, coverage)
    present = np.bincount(scan.sensor, minlength=len(CANONICAL_SENSORS))
    coverage.add_counts(scan.node, {s: int(present[i]) for i, s in enumerate(CANONICAL_SENSORS)}, scan.times.size)


def add_scan_names(scan: SdrLogScan, cache: SdrLineCache, coverage: "SensorCoverage") -> None:
    """Record which raw names of a node's log fed which sensor, and the node's BMC family."""
    names = set()
    for i, n in scan.raw_counts.items():
        name, unit, canonical, verdict, _, _ = cache.info[i]
        names.add(name)
        if verdict == 0:
            coverage.add_raw(scan.node, name, canonical, n)
        elif verdict == 1:
            coverage.add_raw(scan.node, name, None, n, unit)
        elif verdict == 3:
            coverage.add_unit_mismatch(scan.node, name, canonical, unit, n)
    family = cache.mapping.family_of(names)
    if family != "other":  # a node no family marker names keeps its raw-name signature, as elsewhere
        coverage.set_group(scan.node, family)


def iter_archive_logs(path: str | Path, limit: int | None = None) -> Iterator[tuple[str, str, str]]:
    """``(member name, node, text)`` of every regular file in a tar archive, streamed (never extracted).

    ``limit`` stops after that many files (a prefix of the archive, in archive order).
    """
    n = 0
    with tarfile.open(path, mode="r|*") as tf:  # stream mode: one pass, no seeking, nothing on disk
        for member in tf:
            if not member.isfile():
                continue
            fh = tf.extractfile(member)
            if fh is None:
                continue
            yield member.name, host_from_filename(member.name), fh.read().decode("utf-8", errors="replace")
            n += 1
            if limit is not None and n >= limit:
                return


@dataclass
class ArchivePolls:
    """The answered polls of an archive of per-node ``ipmitool sdr`` logs, held compactly.

    Distinct lines are stored once (``lines``); poll ``i`` is the run
    ``ids[offsets[i]:offsets[i + 1]]`` of line ids, taken at ``times[i]`` on node
    ``hosts[host[i]]``, starting at line ``first_line[i]`` of archive member
    ``members[member[i]]``.  ``rejected`` holds ``(time of the node's poll before it,
    Rejected)``.  The FASRC day (1,724 logs, 368,543 polls with rows, 62.6 M sensor lines,
    1,869 distinct lines) holds 250 MiB of arrays, 4.19 bytes per sensor line; buffering it
    took 80 CPU seconds and 462 MiB peak resident memory (``benchmarks/bench_archive_replay.py``).
    """

    source: str
    lines: list[str]
    ids: np.ndarray
    offsets: np.ndarray
    times: np.ndarray
    host: np.ndarray
    member: np.ndarray
    first_line: np.ndarray
    hosts: list[str]
    members: list[str]
    rejected: list[tuple[float, Rejected]]

    def __len__(self) -> int:
        return self.times.size

    def envelope(self, i: int) -> dict:
        """The raw IPMI envelope of poll ``i``, as :func:`~hpcguard.connectors.ipmi.read_ipmi_lines` made it."""
        lines = self.lines
        text = "\n".join([lines[k] for k in self.ids[self.offsets[i]:self.offsets[i + 1]].tolist()]) + "\n"
        return {"format": "ipmitool-sdr", "host": self.hosts[self.host[i]], "time": float(self.times[i]),
                "text": text, "source": f"{self.source}:{self.members[self.member[i]]}:{self.first_line[i]}"}

    def in_time_order(self) -> Iterator[dict | Rejected]:
        """Envelopes of all nodes by poll time (ties in archive order), rejected lines at their node's time."""
        rejected = sorted(self.rejected, key=lambda r: r[0])
        j = 0
        for i in np.argsort(self.times, kind="stable").tolist():
            t = self.times[i]
            while j < len(rejected) and rejected[j][0] <= t:
                yield rejected[j][1]
                j += 1
            yield self.envelope(i)
        for _, r in rejected[j:]:
            yield r


def buffer_archive_polls(path: str | Path, source: str = "", options: IpmiInput | None = None,
                         limit: int | None = None) -> ArchivePolls:
    """Every answered poll of an archive (``limit``: its first N logs), cut by :func:`read_ipmi_lines`.

    >>> import io, tempfile
    >>> arc = Path(tempfile.mkdtemp()) / "day.tar"
    >>> with tarfile.open(arc, "w") as tf:
    ...     for name, minute in (("a-2025-06-03.txt", 1), ("b-2025-06-03.txt", 0)):
    ...         data = f"Timestamp: 2025-06-03 00:0{minute}:01 UTC\\nFan1 | 3000 RPM | ok\\n".encode()
    ...         info = tarfile.TarInfo(name); info.size = len(data); tf.addfile(info, io.BytesIO(data))
    >>> polls = buffer_archive_polls(arc, "day.tar")
    >>> [(e["host"], e["time"], e["text"]) for e in polls.in_time_order()]
    [('b', 1748908801.0, 'Fan1 | 3000 RPM | ok\\n'), ('a', 1748908861.0, 'Fan1 | 3000 RPM | ok\\n')]
    """
    src = source or str(path)
    table: dict[str, int] = {}
    intern = table.setdefault
    ids, offsets, times, first_line = array("I"), array("q", [0]), array("d"), array("q")
    host, member = array("I"), array("I")
    hosts: dict[str, int] = {}
    members: list[str] = []
    rejected: list[tuple[float, Rejected]] = []
    for name, node, text in iter_archive_logs(path, limit):
        last = float("-inf")
        for env in read_ipmi_lines(text.split("\n"), f"{src}:{name}", "ipmitool-sdr", options, host=node):
            if isinstance(env, Rejected):
                rejected.append((last, env))
                continue
            last = env["time"]
            ids.extend([intern(line, len(table)) for line in env["text"][:-1].split("\n")])
            offsets.append(len(ids))
            times.append(last)
            first_line.append(int(env["source"].rsplit(":", 1)[1]))
            host.append(hosts.setdefault(env["host"], len(hosts)))
            member.append(len(members))
        members.append(name)
    return ArchivePolls(src, list(table), np.frombuffer(ids, dtype=np.uint32), np.frombuffer(offsets, dtype=np.int64),
                        np.frombuffer(times, dtype=float), np.frombuffer(host, dtype=np.uint32),
                        np.frombuffer(member, dtype=np.uint32), np.frombuffer(first_line, dtype=np.int64),
                        list(hosts), members, rejected)
