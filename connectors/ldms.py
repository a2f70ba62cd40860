"""LDMS ``store_csv`` files and ``store_avro_kafka`` JSON rows → canonical samples.

:func:`read_store_csv` turns a ``store_csv`` file (header on the first line, or in an
``altheader`` ``<schema>.HEADER`` file) into exactly the row objects that
``store_avro_kafka`` publishes in JSON mode; :class:`LdmsDecoder` turns such rows into
canonical samples using the schema derivations of ``connectors/sensors.toml``
(cumulative counters become rates with :class:`~hpcguard.models.counters.CounterRate`).

``store_csv`` variants: ``time_format=0`` (``#Time`` seconds.µs) and ``1``
(``#Time_msec`` milliseconds + ``Time_usec`` extra µs), ``ietfcsv=1`` quoted header
names, ``userdata=1`` (``<metric>.userdata,<metric>.value`` pairs: the value is
kept).  Row variants (:class:`LdmsColumns`, settings ``[ldms]``): the producer, time
and component columns go by several names (LDMS's own decompositions call the
producer ``producer``); ``as_is`` schema names carry a digest (``meminfo_8d2b8bd`` is
schema ``meminfo``); decomposed ``procnetdev2`` rows carry one interface each
(``dev_name``); per-interface counters (``rx_bytes#eth0``) are summed over the
configured interfaces into ``rx_bytes`` (never ``lo``); U64 metrics that
``store_avro_kafka`` encoded as negative signed longs are read back as unsigned.

Example
-------
>>> dec = LdmsDecoder()
>>> row = {"timestamp": 100.0, "component_id": 1, "ProducerName": "n001", "job_id": 0,
...        "MemTotal": 1000, "MemFree": 100, "MemAvailable": 250}
>>> dec.decode("meminfo", row)["values"]
{'mem_usage': 75.0}
>>> r1 = {"timestamp": 0.0, "producer": "n001", "read_bytes": 0, "write_bytes": 0}
>>> dec.decode("lustre_client", r1) is None   # first counter sample: no rate yet
True
>>> dec.decode("lustre_client", {**r1, "timestamp": 1.0, "read_bytes": 5e6})["values"]["io_read_bytes"]
5000000.0
>>> fold_interfaces({"rx_bytes#lo": 9, "rx_bytes#eth0": 5, "rx_bytes#ib0": 7}, ("eth*", "ib*"))
{'rx_bytes#lo': 9, 'rx_bytes#eth0': 5, 'rx_bytes#ib0': 7, 'rx_bytes': 12}
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Mapping

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.models.counters import CounterRate

_NUMBER = (int, float)  # exact JSON number types (bool is excluded on purpose)
_U64 = 1 << 64
_DIGEST = re.compile(r"^(.+)_[0-9a-fA-F]{6,}$")  # as_is decomposition: <schema>_<digest>
DEV_NAME = "dev_name"  # record key of decomposed list rows (procnetdev2)
NEVER_INTERFACES = ("lo",)  # loopback traffic is not network IO
# schemas whose decomposed rows derive like another schema (procnetdev2 rows fold into procnetdev's columns)
SCHEMA_ALIASES = {"procnetdev2": "procnetdev"}


@dataclass(frozen=True)
class LdmsColumns:
    """Names of the producer, time and component columns of LDMS rows (first present wins).

    Defaults are LDMS's own names: ``store_csv`` writes ``ProducerName``; the example
    decompositions of ``store_avro_kafka`` use ``producer`` (others ``prdcr``).
    ``netdev_interfaces``: fnmatch patterns of the interfaces whose counters are summed.
    """

    producer: tuple[str, ...] = ("ProducerName", "producer", "prdcr", "producer_name")
    time: tuple[str, ...] = ("timestamp", "Time", "time")
    component: tuple[str, ...] = ("component_id", "comp_id")
    netdev_interfaces: tuple[str, ...] = ("eth*", "en*", "ib*", "hsn*", "opa*", "hfi*")  # as LdmsSettings

    @classmethod
    def from_settings(cls, settings=None) -> "LdmsColumns":
        """The ``[ldms]`` settings (``HPCGUARD_LDMS__PRODUCER_COLUMNS`` ...)."""
        if settings is None:
            from hpcguard.settings import Settings

            settings = Settings.load()
        s = settings.ldms
        return cls(tuple(s.producer_columns), tuple(s.time_columns), tuple(s.component_columns),
                   tuple(s.netdev_interfaces))


def find_altheader(path: str | Path) -> Path | None:
    """The ``.HEADER`` file of a headerless ``store_csv`` file, if there is one.

    Tries ``<stem>.HEADER``, ``<name>.HEADER`` and, for rolled files
    ``<schema>.<epoch>``, ``<schema>.HEADER.<epoch>``.
    """
    p = Path(path)
    candidates = [p.with_suffix(".HEADER"), p.with_name(p.name + ".HEADER")]
    if p.suffix[1:].isdigit():
        candidates.insert(0, p.with_name(f"{p.stem}.HEADER{p.suffix}"))
    return next((c for c in candidates if c.is_file()), None)


def _header_names(line: str) -> list[str]:
    """Header names with ietfcsv quotes removed; the leading ``#`` stays on the first one."""
    names = [c.strip() for c in next(csv.reader([line.rstrip("\r\n")]), [])]
    if names and names[0].startswith('#"'):  # #"Time" — the comment mark outside the quotes
        names[0] = "#" + names[0][1:].strip('"')
    return names


def parse_header(line: str, source: str = "", line_no: int | None = 1) -> list[str]:
    """Column names of a classic ``store_csv`` header line (``#Time,Time_usec,ProducerName,...``; quotes allowed)."""
    cols = _header_names(line)
    if cols[:3] != ["#Time", "Time_usec", "ProducerName"] or len(cols) < 4:
        raise ParseError("bad_header", f"store_csv header must start with '#Time,Time_usec,ProducerName', "
                         f"got {line[:80]!r}", line=line_no, source=source)
    if len(set(cols)) != len(cols):
        raise ParseError("bad_header", "duplicate column names in store_csv header", line=line_no, source=source)
    return cols


@dataclass(frozen=True)
class StoreCsvLayout:
    """What a ``store_csv`` header says: time format and ``(row key, column index)`` of every value."""

    time_msec: bool  # time_format=1: #Time_msec,Time_usec
    n_cols: int
    columns: tuple[tuple[str, int], ...]  # after ProducerName; userdata columns left out


def parse_layout(line: str, source: str = "", line_no: int | None = 1) -> StoreCsvLayout:
    """The :class:`StoreCsvLayout` of any supported ``store_csv`` header variant.

    >>> parse_layout('"#Time_msec","Time_usec","ProducerName","component_id.userdata","component_id.value"')
    StoreCsvLayout(time_msec=True, n_cols=5, columns=(('component_id', 4),))
    """
    cols = _header_names(line)
    if cols[:1] not in (["#Time"], ["#Time_msec"]) or cols[1:3] != ["Time_usec", "ProducerName"] or len(cols) < 4:
        raise ParseError("bad_header", "store_csv header must start with '#Time,Time_usec,ProducerName' "
                         f"(or #Time_msec for time_format=1), got {line[:80]!r}", line=line_no, source=source)
    if len(set(cols)) != len(cols):
        raise ParseError("bad_header", "duplicate column names in store_csv header", line=line_no, source=source)
    userdata = any(c.endswith(".userdata") for c in cols)
    keep = []
    for i, c in enumerate(cols[3:], start=3):
        if userdata and c.endswith(".userdata"):
            continue  # userdata=1: the metric's user data, not its value
        keep.append((c[: -len(".value")] if userdata and c.endswith(".value") else c, i))
    return StoreCsvLayout(cols[0] == "#Time_msec", len(cols), tuple(keep))


def _number(text: str) -> int | float:
    """An int for plain digits (as store_avro_kafka writes u64 metrics), else a float."""
    return int(text) if text.isdigit() else float(text)


def read_store_csv(path: str | Path, header_path: str | Path | None = None,
                   source: str | None = None) -> Iterator[dict | Rejected]:
    """Rows of a ``store_csv`` file as ``store_avro_kafka`` JSON row dicts.

    Yields ``{"timestamp": float, "ProducerName": str, "component_id": int,
    "job_id": int, <metric>: number, ...}`` per row, or :class:`Rejected` (with the
    1-based line number) for a row that cannot be parsed; the file goes on.
    A missing header raises :class:`ParseError` (``bad_header``).
    """
    p = Path(path)
    src = source or str(p)
    with open(p, newline="") as fh:
        first = fh.readline()
        if first.startswith("#") or first.startswith('"#'):
            layout = parse_layout(first, src, 1)
            line_no = 1
        else:
            hp = Path(header_path) if header_path else find_altheader(p)
            if hp is None:
                raise ParseError("bad_header", "no '#Time,...' header line and no .HEADER file (altheader) next to it",
                                 line=1, source=src)
            with open(hp, newline="") as hfh:
                layout = parse_layout(hfh.readline(), str(hp), 1)
            fh.seek(0)
            line_no = 0
        n_cols = layout.n_cols
        for fields in csv.reader(fh):
            line_no += 1
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if fields[0].startswith("#"):
                continue  # a repeated header after a store restart
            if len(fields) != n_cols:
                yield Rejected(src, line_no, "bad_row", f"expected {n_cols} columns, got {len(fields)}",
                               ",".join(fields))
                continue
            try:
                ts = float(fields[0]) / 1000.0 + float(fields[1]) / 1e6 if layout.time_msec else float(fields[0])
                if not math.isfinite(ts):
                    raise ValueError
            except ValueError:
                yield Rejected(src, line_no, "bad_time", f"Time {fields[0]!r} is not a number", ",".join(fields))
                continue
            if not fields[2]:
                yield Rejected(src, line_no, "missing_field", "empty ProducerName", ",".join(fields))
                continue
            row: dict = {"timestamp": ts, "ProducerName": fields[2]}
            try:
                for name, i in layout.columns:
                    row[name] = _number(fields[i])
            except ValueError as exc:
                yield Rejected(src, line_no, "bad_number", f"not a number: {exc}", ",".join(fields))
                continue
            yield row


@lru_cache(maxsize=4096)
def _counted(iface: str, interfaces: tuple[str, ...]) -> bool:
    return iface not in NEVER_INTERFACES and any(fnmatchcase(iface, pat) for pat in interfaces)


def fold_interfaces(columns: dict, interfaces: tuple[str, ...]) -> dict:
    """Add ``<name>`` = Σ ``<name>#<iface>`` over interfaces matching ``interfaces`` (never ``lo``).

    Works on one row (numbers) and on whole files (numpy arrays) alike; a name that
    is already a column, or has no matching interface, is left alone.
    """
    sums: dict = {}
    for key, value in columns.items():
        base, sep, iface = key.rpartition("#")
        if not sep or not _counted(iface, interfaces):
            continue
        sums[base] = value if base not in sums else sums[base] + value
    return {**columns, **{k: v for k, v in sums.items() if k not in columns}}


def base_schema(schema: str, known: Mapping) -> str:
    """The mapping's name for a schema: ``meminfo_8d2b8bd`` (as_is digest) → ``meminfo``; aliases applied."""
    if schema in known:
        return schema
    m = _DIGEST.match(schema)
    name = m.group(1) if m else schema
    return SCHEMA_ALIASES.get(name, name)


class LdmsDecoder:
    """LDMS rows (``store_avro_kafka`` JSON objects) → canonical sample dicts.

    Parameters
    ----------
    mapping
        Sensor mapping; default ``connectors/sensors.toml``.
    max_gap_factor
        A counter step longer than this many sampling periods yields no rate.
    columns
        Producer/time/component column names and summed interfaces; default the
        ``[ldms]`` settings.

    Decomposed rows (with ``dev_name``) of one node and time are merged into one
    row: the merged row is decoded when that node's next time arrives, so such
    schemas lag one sampling period.  ``stats`` counts ``rows``, ``samples``,
    ``no_value`` (nothing derivable yet) and ``unsigned`` (negative U64 values read
    back); :meth:`counter_stats` the counter flags (``first``, ``gap``, ``reset``,
    ``out_of_order``).
    """

    def __init__(self, mapping: SensorMapping | None = None, max_gap_factor: float = 5,
                 columns: LdmsColumns | None = None):
        self.mapping = mapping or SensorMapping.load()
        self.max_gap_factor = float(max_gap_factor)
        self.columns = columns or LdmsColumns.from_settings()
        self._counters: dict[str, CounterRate] = {}
        self.stats: dict[str, int] = {"rows": 0, "samples": 0, "no_value": 0, "unsigned": 0}
        self._plans: dict[str, tuple] = {}
        self._pending: dict[tuple[str, str], dict] = {}  # (schema, node) → merged decomposed row

    def _counter(self, schema: str, period_s: float) -> CounterRate:
        c = self._counters.get(schema)
        if c is None:
            c = self._counters[schema] = CounterRate(self.max_gap_factor * period_s)
        return c

    def counter_stats(self) -> dict[str, int]:
        """Counter flags summed over schemas."""
        out: dict[str, int] = {}
        for c in self._counters.values():
            for k, v in c.stats.items():
                out[k] = out.get(k, 0) + v
        return out

    def _plan(self, schema: str) -> tuple:
        plan = self._plans.get(schema)
        if plan is None:
            spec = self.mapping.ldms.get(base_schema(schema, self.mapping.ldms))
            if spec is None:
                raise ParseError("unknown_schema", f"no LDMS schema {schema!r} in the sensor mapping "
                                 f"(known: {', '.join(sorted(self.mapping.ldms))})", source=f"ldms.{schema}")
            needed = tuple(dict.fromkeys(c for m in spec.derive for c in m.columns))
            counter = self._counter(spec.schema, spec.period_s) if any(m.counters for m in spec.derive) else None
            plan = self._plans[schema] = (spec, needed, counter, f"ldms:{spec.schema}")
        return plan

    def _first(self, row: Mapping, names: tuple[str, ...]):
        for n in names:
            if n in row:
                return row[n]
        return None

    def decode(self, schema: str, row: Mapping) -> dict | None:
        """A sample ``{"node", "time", "source", "values", "job_id"}`` or ``None``.

        Raises :class:`ParseError` (``unknown_schema``, ``missing_field``,
        ``bad_time``, ``bad_number``) for a row that cannot be used.
        """
        self._plan(schema)
        node = self._first(row, self.columns.producer)
        if type(node) is not str or not node:
            raise ParseError("missing_field", f"row has no producer column ({', '.join(self.columns.producer)}; "
                             "set [ldms] producer_columns for other names)", source=f"ldms.{schema}")
        t = self._first(row, self.columns.time)
        if type(t) not in _NUMBER or not math.isfinite(t):
            raise ParseError("bad_time", f"timestamp {t!r} is not a finite number", source=f"ldms.{schema}")
        if DEV_NAME in row:
            row = self._merge_decomposed(schema, node, float(t), row)
            if row is None:
                return None
            t = row["timestamp"]
        return self._derive(schema, node, float(t), row)

    def _merge_decomposed(self, schema: str, node: str, t: float, row: Mapping) -> dict | None:
        """Merge a one-interface row into its node's row of time ``t``; the previous time's row once complete."""
        dev = row[DEV_NAME]
        if type(dev) is not str or not dev:
            raise ParseError("missing_field", f"{DEV_NAME} {dev!r} is not an interface name", source=f"ldms.{schema}")
        skip = {DEV_NAME, *self.columns.producer, *self.columns.time, *self.columns.component, "job_id"}
        wide = {f"{k}#{dev}": v for k, v in row.items() if k not in skip}
        key = (schema, node)
        pending = self._pending.get(key)
        if pending is not None and pending["timestamp"] == t:
            pending.update(wide)
            return None
        self._pending[key] = {"timestamp": t, "job_id": row.get("job_id"), **wide}
        return pending

    def _derive(self, schema: str, node: str, t: float, row: Mapping) -> dict | None:
        spec, needed, counter, source = self._plan(schema)
        if not all(map(row.__contains__, needed)):
            row = fold_interfaces(dict(row), self.columns.netdev_interfaces)
        try:
            raw = list(map(row.__getitem__, needed))
        except KeyError as exc:
            col = exc.args[0]
            ifaces = sorted({k.rpartition("#")[2] for k in row if isinstance(k, str) and k.startswith(f"{col}#")})
            why = (f"no configured interface ({', '.join(self.columns.netdev_interfaces)}) among "
                   f"{', '.join(ifaces)}; lo never counts (set [ldms] netdev_interfaces)") if ifaces else ""
            raise ParseError("missing_field", f"row has no column {col!r} (schema {schema})" +
                             (f": {why}" if why else ""), source=f"ldms.{schema}") from None
        if not all(type(v) in _NUMBER for v in raw):
            c, v = next((c, v) for c, v in zip(needed, raw) if type(v) not in _NUMBER)
            raise ParseError("bad_number", f"column {c!r} is {v!r}, not a number", source=f"ldms.{schema}")
        if any(type(v) is int and v < 0 for v in raw):  # U64 sent as a signed Avro long: two's complement
            self.stats["unsigned"] += sum(1 for v in raw if type(v) is int and v < 0)
            raw = [v + _U64 if type(v) is int and v < 0 else v for v in raw]
        # ints stay exact: a u64 counter near 2**64 has 4 KiB float steps, its deltas must not
        cols = {c: v if type(v) is int else float(v) for c, v in zip(needed, raw)}
        self.stats["rows"] += 1
        values: dict[str, float] = {}
        for metric in spec.derive:
            value: float | None
            if metric.kind == "gauge":
                value = float(cols[metric.columns[0]])
            elif metric.kind == "ratio":
                num, den = cols[metric.columns[0]], cols[metric.columns[1]]
                value = None if den <= 0 else ((1.0 - num / den) if metric.complement else num / den) * 100.0
            else:
                if metric.kind == "rate":
                    value = counter.update_one((node, metric.columns[0]), t, cols[metric.columns[0]])
                else:  # delta_share
                    steps = [counter.delta_one((node, c), t, cols[c]) for c in metric.counters]
                    if any(s is None for s in steps):
                        value = None
                    else:
                        d = {c: s[0] for c, s in zip(metric.counters, steps)}
                        total = sum(d[c] for c in metric.columns[1:])
                        value = None if total <= 0 else d[metric.columns[0]] / total * 100.0
            if value is not None and math.isfinite(value):
                values[metric.canonical] = value
        if not values:
            self.stats["no_value"] += 1
            return None
        self.stats["samples"] += 1
        job = row.get("job_id")
        job_id = None if job in (None, 0, "0", "") else str(job)
        return {"node": node, "time": t, "source": source, "values": values, "job_id": job_id}
