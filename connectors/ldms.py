"""LDMS ``store_csv`` files and ``store_avro_kafka`` JSON rows → canonical samples.

:func:`read_store_csv` turns a ``store_csv`` file (header on the first line, or in an
``altheader`` ``<schema>.HEADER`` file) into exactly the row objects that
``store_avro_kafka`` publishes in JSON mode; :class:`LdmsDecoder` turns such rows into
canonical samples using the schema derivations of ``connectors/sensors.toml``
(cumulative counters become rates with :class:`~hpcguard.models.counters.CounterRate`).

Example
-------
>>> dec = LdmsDecoder()
>>> row = {"timestamp": 100.0, "component_id": 1, "ProducerName": "n001", "job_id": 0,
...        "MemTotal": 1000, "MemFree": 100, "MemAvailable": 250}
>>> dec.decode("meminfo", row)["values"]
{'mem_usage': 75.0}
>>> r1 = {"timestamp": 0.0, "ProducerName": "n001", "read_bytes": 0, "write_bytes": 0}
>>> dec.decode("lustre_client", r1) is None   # first counter sample: no rate yet
True
>>> dec.decode("lustre_client", {**r1, "timestamp": 1.0, "read_bytes": 5e6})["values"]["io_read_bytes"]
5000000.0
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterator, Mapping

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.models.counters import CounterRate

_NUMBER = (int, float)  # exact JSON number types (bool is excluded on purpose)


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


def parse_header(line: str, source: str = "", line_no: int | None = 1) -> list[str]:
    """Column names of a ``store_csv`` header line (``#Time,Time_usec,ProducerName,...``)."""
    cols = [c.strip() for c in line.rstrip("\r\n").split(",")]
    if cols[:3] != ["#Time", "Time_usec", "ProducerName"] or len(cols) < 4:
        raise ParseError("bad_header", f"store_csv header must start with '#Time,Time_usec,ProducerName', "
                         f"got {line[:80]!r}", line=line_no, source=source)
    if len(set(cols)) != len(cols):
        raise ParseError("bad_header", "duplicate column names in store_csv header", line=line_no, source=source)
    return cols


def _number(text: str) -> int | float:
    """An int for plain digits (as store_avro_kafka writes u64 metrics), else a float."""
    return int(text) if text.isdigit() else float(text)


def read_store_csv(path: str | Path, header_path: str | Path | None = None,
                   source: str | None = None) -> Iterator[dict | Rejected]:
    """Rows of a ``store_csv`` file as ``store_avro_kafka`` JSON row dicts.

    Yields ``{"timestamp": float, "component_id": int, "ProducerName": str,
    "job_id": int, <metric>: number, ...}`` per row, or :class:`Rejected` (with the
    1-based line number) for a row that cannot be parsed; the file goes on.
    A missing header raises :class:`ParseError` (``bad_header``).
    """
    p = Path(path)
    src = source or str(p)
    with open(p, newline="") as fh:
        first = fh.readline()
        if first.startswith("#"):
            cols = parse_header(first, src, 1)
            line_no = 1
        else:
            hp = Path(header_path) if header_path else find_altheader(p)
            if hp is None:
                raise ParseError("bad_header", "no '#Time,...' header line and no .HEADER file (altheader) next to it",
                                 line=1, source=src)
            with open(hp) as hfh:
                cols = parse_header(hfh.readline(), str(hp), 1)
            fh.seek(0)
            line_no = 0
        n_cols = len(cols)
        extras = [c for c in cols[3:] if c not in ("component_id", "job_id")]
        idx_comp = cols.index("component_id") if "component_id" in cols else None
        idx_job = cols.index("job_id") if "job_id" in cols else None
        metric_idx = [(c, cols.index(c)) for c in extras]
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
                ts = float(fields[0])
                if not math.isfinite(ts):
                    raise ValueError
            except ValueError:
                yield Rejected(src, line_no, "bad_time", f"Time {fields[0]!r} is not a number", ",".join(fields))
                continue
            row: dict = {"timestamp": ts}
            try:
                if idx_comp is not None:
                    row["component_id"] = int(fields[idx_comp])
                row["ProducerName"] = fields[2]
                if idx_job is not None:
                    row["job_id"] = _number(fields[idx_job])
                for name, i in metric_idx:
                    row[name] = _number(fields[i])
            except ValueError as exc:
                yield Rejected(src, line_no, "bad_number", f"not a number: {exc}", ",".join(fields))
                continue
            if not fields[2]:
                yield Rejected(src, line_no, "missing_field", "empty ProducerName", ",".join(fields))
                continue
            yield row


class LdmsDecoder:
    """LDMS rows (``store_avro_kafka`` JSON objects) → canonical sample dicts.

    Parameters
    ----------
    mapping
        Sensor mapping; default ``connectors/sensors.toml``.
    max_gap_factor
        A counter step longer than this many sampling periods yields no rate.

    ``stats`` counts ``rows``, ``samples``, ``no_value`` (nothing derivable yet) and
    the counter flags (``first``, ``gap``, ``reset``, ``out_of_order``) per schema-wide
    counter.
    """

    def __init__(self, mapping: SensorMapping | None = None, max_gap_factor: float = 5):
        self.mapping = mapping or SensorMapping.load()
        self.max_gap_factor = float(max_gap_factor)
        self._counters: dict[str, CounterRate] = {}
        self.stats: dict[str, int] = {"rows": 0, "samples": 0, "no_value": 0}
        self._plans: dict[str, tuple] = {}

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

    def decode(self, schema: str, row: Mapping) -> dict | None:
        """A sample ``{"node", "time", "source", "values", "job_id"}`` or ``None``.

        Raises :class:`ParseError` (``unknown_schema``, ``missing_field``,
        ``bad_time``, ``bad_number``) for a row that cannot be used.
        """
        plan = self._plans.get(schema)
        if plan is None:
            spec = self.mapping.ldms.get(schema)
            if spec is None:
                raise ParseError("unknown_schema", f"no LDMS schema {schema!r} in the sensor mapping "
                                 f"(known: {', '.join(sorted(self.mapping.ldms))})", source=f"ldms.{schema}")
            needed = tuple(dict.fromkeys(c for m in spec.derive for c in m.columns))
            counter = self._counter(schema, spec.period_s) if any(m.counters for m in spec.derive) else None
            plan = self._plans[schema] = (spec, needed, counter, f"ldms:{schema}")
        spec, needed, counter, source = plan
        node = row.get("ProducerName")
        if type(node) is not str or not node:
            raise ParseError("missing_field", "row has no ProducerName", source=f"ldms.{schema}")
        t = row.get("timestamp")
        if type(t) not in _NUMBER or not math.isfinite(t):
            raise ParseError("bad_time", f"timestamp {t!r} is not a finite number", source=f"ldms.{schema}")
        t = float(t)
        try:
            raw = [row[c] for c in needed]
        except KeyError as exc:
            raise ParseError("missing_field", f"row has no column {exc.args[0]!r} (schema {schema})",
                             source=f"ldms.{schema}") from None
        for c, v in zip(needed, raw):
            if type(v) not in _NUMBER:
                raise ParseError("bad_number", f"column {c!r} is {v!r}, not a number", source=f"ldms.{schema}")
        cols = dict(zip(needed, map(float, raw)))
        self.stats["rows"] += 1
        values: dict[str, float] = {}
        for metric in spec.derive:
            value: float | None
            if metric.kind == "gauge":
                value = cols[metric.columns[0]]
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
