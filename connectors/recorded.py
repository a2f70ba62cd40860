"""Load a recorded-data directory (``docs/formats.md``) as numpy arrays for offline training.

:func:`load_sensor_grid` aligns the ten canonical sensors of every node onto the
15 s grid the streaming worker uses (``models.grid.NodeGrid``: steps at multiples of
``grid_s`` in epoch time): IPMI readings take the last value within a step, LDMS-derived
values the mean within the step; a step without a value stays NaN.  Counter-derived
values (``procstat`` cpu_user, ``procnetdev`` bytes) follow the same reset/gap rules
as the stream (:mod:`hpcguard.models.counters`).  The 1 s ``lustre_client`` file is not
needed for the ten sensors and is not read.

Example
-------
>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp()); (d / "ldms").mkdir()
>>> _ = (d / "ldms" / "loadavg.csv").write_text(
...     "#Time,Time_usec,ProducerName,component_id,job_id,load1min,load5min,load15min\\n"
...     "0.0,0,n001,1,0,1.0,0,0\\n5.0,0,n001,1,0,3.0,0,0\\n15.0,0,n001,1,0,4.0,0,0\\n")
>>> g = load_sensor_grid(d)
>>> g.nodes, g.values.shape, g.values[0, :, 4].tolist()
(['n001'], (1, 2, 10), [2.0, 4.0])
"""
from __future__ import annotations

import csv
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpcguard.connectors.errors import ParseError
from hpcguard.connectors.ipmi import POLL, decode_ipmi_envelope, read_ipmi_file
from hpcguard.connectors.ldms import find_altheader, parse_header
from hpcguard.connectors.mapping import MetricSpec, SensorMapping
from hpcguard.connectors.replay import detect_format
from hpcguard.models.counters import counter_deltas, counter_rates
from hpcguard.models.features import CANONICAL_SENSORS

_SENSOR = {name: i for i, name in enumerate(CANONICAL_SENSORS)}


@dataclass
class SensorGrid:
    """Canonical sensors on a regular grid: ``values[node, step, sensor]`` (NaN = missing)."""

    nodes: list[str]
    t0: float
    grid_s: float
    values: np.ndarray
    skipped: dict[str, int] = field(default_factory=dict)  # input rows not used, by reason

    @property
    def times(self) -> np.ndarray:
        """Start time of every step."""
        return self.t0 + self.grid_s * np.arange(self.values.shape[1])


def load_meta(data_dir: str | Path) -> dict:
    """``meta.json`` of a recorded directory (``{}`` when there is none)."""
    p = Path(data_dir, "meta.json")
    if not p.is_file():
        return {}
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ParseError("bad_json", f"meta.json is not valid JSON: {exc}", source=str(p)) from None


def _read_table(p: Path, columns: list[str], numeric: list[str]) -> dict[str, np.ndarray]:
    """Columns of a small CSV with a header line; numeric ones as float."""
    with open(p, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or any(c not in header for c in columns):
            raise ParseError("bad_header", f"expected header with {','.join(columns)}", 1, str(p))
        rows = [r for r in reader if r]
    idx = [header.index(c) for c in columns]
    out: dict[str, np.ndarray] = {}
    for c, i in zip(columns, idx):
        col = [r[i] if i < len(r) else "" for r in rows]
        if c in numeric:
            try:
                out[c] = np.array([float(x) if x != "" else np.nan for x in col], dtype=float)
            except ValueError as exc:
                raise ParseError("bad_number", f"column {c}: {exc}", source=str(p)) from None
        else:
            out[c] = np.array(col, dtype=str)
    return out


def _structured(cols: dict[str, np.ndarray], dtypes: list[tuple[str, str]]) -> np.ndarray:
    n = len(next(iter(cols.values()))) if cols else 0
    arr = np.zeros(n, dtype=dtypes)
    for name, _ in dtypes:
        arr[name] = cols[name]
    return arr


def load_failures(data_dir: str | Path) -> np.ndarray:
    """Ground-truth failures: structured array ``time`` (f8), ``node``, ``job_id``, ``cause`` (str)."""
    p = Path(data_dir, "failures.csv")
    dtypes = [("time", "f8"), ("node", "U64"), ("job_id", "U32"), ("cause", "U32")]
    if not p.is_file():
        raise FileNotFoundError(f"no failures.csv in {data_dir}")
    return _structured(_read_table(p, ["time", "node", "job_id", "cause"], ["time"]), dtypes)


def load_anomalies(data_dir: str | Path) -> np.ndarray:
    """Ground-truth anomalies: ``start``, ``end`` (f8), ``node``, ``kind`` (str), ``leads_to_failure`` (bool)."""
    p = Path(data_dir, "anomalies.csv")
    if not p.is_file():
        raise FileNotFoundError(f"no anomalies.csv in {data_dir}")
    cols = _read_table(p, ["start", "end", "node", "kind", "leads_to_failure"], ["start", "end", "leads_to_failure"])
    cols["leads_to_failure"] = cols["leads_to_failure"] > 0
    return _structured(cols, [("start", "f8"), ("end", "f8"), ("node", "U64"), ("kind", "U32"),
                              ("leads_to_failure", "?")])


def read_store_csv_arrays(path: str | Path) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``(times, producer names, {column: float array})`` of a whole ``store_csv`` file (C parser)."""
    p = Path(path)
    with open(p) as fh:
        first = fh.readline()
    if first.startswith("#"):
        cols = parse_header(first, str(p))
    else:
        hp = find_altheader(p)
        if hp is None:
            raise ParseError("bad_header", "no header line and no .HEADER file", 1, str(p))
        cols = parse_header(hp.read_text().splitlines()[0], str(hp))
    numeric = [i for i, c in enumerate(cols) if c != "ProducerName"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy notes the skipped '#' header line
            data = np.loadtxt(p, delimiter=",", comments="#", usecols=numeric, ndmin=2, dtype=float)
            names = np.loadtxt(p, delimiter=",", comments="#", usecols=(2,), ndmin=1, dtype=str)
    except ValueError as exc:
        raise ParseError("bad_row", f"store_csv file cannot be loaded: {exc}", source=str(p)) from None
    columns = {cols[i]: data[:, j] for j, i in enumerate(numeric)}
    return columns["#Time"], names, columns


def derive_columns(spec: MetricSpec, times: np.ndarray, keys: np.ndarray, columns: dict[str, np.ndarray],
                   max_gap_s: float) -> np.ndarray:
    """Vectorised form of :meth:`LdmsDecoder.decode` for one metric over a whole file."""
    missing = [c for c in spec.columns if c not in columns]
    if missing:
        raise ParseError("missing_field", f"no column {missing[0]!r} for {spec.canonical}")
    with np.errstate(invalid="ignore", divide="ignore"):
        if spec.kind == "gauge":
            return columns[spec.columns[0]].copy()
        if spec.kind == "ratio":
            num, den = columns[spec.columns[0]], columns[spec.columns[1]]
            r = num / np.where(den > 0, den, np.nan)
            return ((1.0 - r) if spec.complement else r) * 100.0
        if spec.kind == "rate":
            return counter_rates(times, columns[spec.columns[0]], max_gap_s, keys)[0]
        counters = spec.counters
        d, _, _ = counter_deltas(times, np.column_stack([columns[c] for c in counters]), max_gap_s, keys)
        d = np.where(np.isnan(d).any(axis=1, keepdims=True), np.nan, d)  # a flagged counter voids the step
        pos = {c: i for i, c in enumerate(counters)}
        total = sum(d[:, pos[c]] for c in spec.columns[1:])
        return d[:, pos[spec.columns[0]]] / np.where(total > 0, total, np.nan) * 100.0


def _ipmi_fast(path: Path, mapping: SensorMapping,
               skipped: dict[str, int]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """``(hosts per poll, poll times, (poll index, sensor, priority) int rows, readings)`` of a FreeIPMI file.

    Rows that are not FreeIPMI rows or lie outside a poll block are counted in ``skipped``.
    """
    cache: dict[str, tuple[int, int] | None] = {}
    hosts: list[str] = []
    times: list[float] = []
    rows: list[tuple[int, int, int]] = []
    readings: list[str] = []
    poll = -1
    with open(path) as fh:
        for line in fh:
            if line[0] == "#":
                m = POLL.match(line.rstrip("\n"))
                if m is not None:
                    poll += 1
                    hosts.append(m.group(1))
                    times.append(float(m.group(2)))
                continue
            parts = line.split(",", 4)
            if len(parts) < 5 or poll < 0:
                if line.strip() and not line.startswith("ID,"):
                    skipped["ipmi_bad_row"] = skipped.get("ipmi_bad_row", 0) + 1
                continue
            name = parts[1]
            hit = cache.get(name, False)
            if hit is False:
                lk = mapping.ipmi_lookup(name)
                hit = cache[name] = None if lk is None else (_SENSOR[lk[0]], lk[1])
            if hit is not None:
                rows.append((poll, hit[0], hit[1]))
                readings.append(parts[3])
    out = _readings_to_float(readings, str(path))
    return hosts, np.array(times, float), np.array(rows, dtype=np.int64).reshape(-1, 3), out


def _readings_to_float(readings: list[str], source: str) -> np.ndarray:
    """Reading strings → floats (``N/A`` and friends → NaN), converting each distinct string once."""
    if not readings:
        return np.zeros(0)
    uniq, inv = np.unique(np.array(readings), return_inverse=True)
    conv = np.full(uniq.size, np.nan)
    for i, text in enumerate(uniq.tolist()):
        if text.strip().lower() in ("n/a", "na", "", "no reading", "disabled"):
            continue
        try:
            conv[i] = float(text)
        except ValueError:
            raise ParseError("bad_number", f"IPMI reading {text!r} is not a number", source=source) from None
    return conv[inv.ravel()]


def _reduce_polls(poll: np.ndarray, sensor: np.ndarray, priority: np.ndarray, value: np.ndarray,
                  mapping: SensorMapping) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One value per (poll, sensor) by the sensor's reducer; returns (poll, sensor, value)."""
    keep = ~np.isnan(value)
    poll, sensor, priority, value = poll[keep], sensor[keep], priority[keep], value[keep]
    out_p, out_s, out_v = [], [], []
    for canonical, (_, how) in mapping.ipmi.items():
        s = _SENSOR[canonical]
        sel = sensor == s
        if not sel.any():
            continue
        p, pr, v = poll[sel], priority[sel], value[sel]
        if how == "mean":
            u, inv = np.unique(p, return_inverse=True)
            out_p.append(u)
            out_v.append(np.bincount(inv, weights=v) / np.bincount(inv))
        else:
            key = pr if how == "first" else (v if how == "min" else -v)
            order = np.lexsort((key, p))
            p, v = p[order], v[order]
            first = np.ones(p.size, bool)
            first[1:] = p[1:] != p[:-1]
            out_p.append(p[first])
            out_v.append(v[first])
        out_s.append(np.full(out_p[-1].size, s))
    if not out_p:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(out_p), np.concatenate(out_s), np.concatenate(out_v)


def load_sensor_grid(data_dir: str | Path, grid_s: float = 15.0, mapping: SensorMapping | None = None,
                     max_gap_factor: float = 5) -> SensorGrid:
    """The ten canonical sensors of a recorded directory on a ``grid_s`` grid.

    Nodes: ``meta.json`` ``nodes`` when present (plus any other node seen), else
    every node seen, sorted.  Time span: ``meta.json`` ``start``/``end`` or the data.
    """
    d = Path(data_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"no such directory: {d}")
    mapping = mapping or SensorMapping.load()
    meta = load_meta(d)
    # (node name array, times, sensor index, values, is_last_value)
    parts: list[tuple[np.ndarray, np.ndarray, int | np.ndarray, np.ndarray, bool]] = []
    skipped: dict[str, int] = {}
    for f in sorted(Path(d, "ldms").glob("*")) if Path(d, "ldms").is_dir() else []:
        schema = f.name.split(".")[0]
        spec = mapping.ldms.get(schema)
        if spec is None or spec.io or ".HEADER" in f.name or not f.is_file():
            continue
        times, names, columns = read_store_csv_arrays(f)
        if times.size == 0:
            continue
        ids, keys = np.unique(names, return_inverse=True)
        for metric in spec.derive:
            if metric.canonical in _SENSOR:
                v = derive_columns(metric, times, keys, columns, max_gap_factor * spec.period_s)
                parts.append((names, times, _SENSOR[metric.canonical], v, False))
    ipmi_dir = Path(d, "ipmi")
    for f in sorted(ipmi_dir.glob("*")) if ipmi_dir.is_dir() else []:
        if not f.is_file():
            continue
        fmt = detect_format(f)
        if fmt == "freeipmi":
            hosts, ptimes, rows, vals = _ipmi_fast(f, mapping, skipped)
            if rows.size == 0:
                continue
            p, s, v = _reduce_polls(rows[:, 0], rows[:, 1], rows[:, 2], vals, mapping)
            parts.append((np.asarray(hosts)[p], ptimes[p], s, v, True))
        elif fmt in ("ipmitool", "telegraf"):
            envs = list(read_ipmi_file(f))
            skipped["ipmi_bad_row"] = skipped.get("ipmi_bad_row", 0) + sum(1 for e in envs if not isinstance(e, dict))
            samples = [s for env in envs if isinstance(env, dict) for s in decode_ipmi_envelope(env, mapping)]
            flat = [(s["node"], s["time"], _SENSOR[k], x) for s in samples for k, x in s["values"].items()]
            if flat:
                n, t, s, v = zip(*flat)
                parts.append((np.asarray(n), np.asarray(t, float), np.asarray(s), np.asarray(v, float), True))
    seen = sorted({str(x) for part in parts for x in np.unique(part[0])})
    nodes = list(meta.get("nodes", []))
    nodes += [n for n in seen if n not in set(nodes)]
    all_t = [p[1] for p in parts if p[1].size]
    start = meta.get("start", min(float(t.min()) for t in all_t) if all_t else 0.0)
    t0 = math.floor(float(start) / grid_s) * grid_s
    if "end" in meta:
        n_steps = max(int(math.ceil((float(meta["end"]) - t0) / grid_s)), 0)
    else:
        n_steps = int((max(float(t.max()) for t in all_t) - t0) // grid_s) + 1 if all_t else 0
    n_nodes, n_sensors = len(nodes), len(CANONICAL_SENSORS)
    size = n_nodes * n_steps * n_sensors
    sums, counts = np.zeros(size), np.zeros(size)
    last = np.full(size, np.nan)
    node_index = {n: i for i, n in enumerate(nodes)}
    for names, times, sensor, values, is_last in parts:
        uniq, inv = np.unique(names, return_inverse=True)
        node = np.array([node_index[str(u)] for u in uniq], dtype=np.int64)[inv]
        step = np.floor(times / grid_s).astype(np.int64) - int(round(t0 / grid_s))
        ok = np.isfinite(values) & (step >= 0) & (step < n_steps)
        flat = ((node * n_steps + step) * n_sensors + sensor)[ok]
        v = values[ok]
        if is_last:  # the latest reading per (node, step, sensor)
            order = np.lexsort((times[ok], flat))
            f_sorted = flat[order]
            tail = np.ones(f_sorted.size, bool)
            tail[:-1] = f_sorted[1:] != f_sorted[:-1]
            last[f_sorted[tail]] = v[order][tail]
        else:
            sums += np.bincount(flat, weights=v, minlength=size)
            counts += np.bincount(flat, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums / counts
    values = np.where(counts > 0, mean, last).reshape(n_nodes, n_steps, n_sensors)
    return SensorGrid(nodes=nodes, t0=float(t0), grid_s=float(grid_s), values=values, skipped=skipped)
