"""Load a recorded-data directory (``docs/formats.md``) as numpy arrays for offline training.

:func:`load_sensor_grid` aligns the ten canonical sensors of every node onto the
15 s grid the streaming worker uses (``models.grid.NodeGrid``: steps at multiples of
``grid_s`` in epoch time): IPMI readings take the last value within a step, LDMS-derived
values the mean within the step; a step without a value stays NaN.  IPMI polls take their
step by the worker's rule (:func:`~hpcguard.models.grid.poll_steps`): a jittered poll whose
step an earlier poll took moves to the next step when that starts within
``worker.poll_tolerance_s``, else merges; the coverage counts both.  Counter-derived
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
from datetime import datetime
from pathlib import Path
from typing import Iterable

import numpy as np

from hpcguard.connectors.coverage import SensorCoverage
from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.hostlist import expand_hostlist
from hpcguard.connectors.fasrc import (SdrLineCache, add_scan_names, is_archive, iter_archive_logs,
                                       scan_sdr_log)
from hpcguard.connectors.file_formats import detect_format
from hpcguard.connectors.ipmi import (IpmiInput, decode_ipmi_envelope, freeipmi_layout_of, freeipmi_row_parser,
                                      host_from_filename, is_freeipmi_header, read_ipmi_lines)
from hpcguard.connectors.ldms import (LdmsColumns, base_schema, find_altheader, fold_interfaces, parse_layout,
                                      read_store_csv)
from hpcguard.connectors.mapping import MetricSpec, SensorMapping
from hpcguard.connectors.netdev import counter_columns, interface_traffic
from hpcguard.models.counters import counter_deltas, counter_rates
from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.models.grid import place_readings
from hpcguard.settings import Settings

_SENSOR = {name: i for i, name in enumerate(CANONICAL_SENSORS)}


@dataclass
class SensorGrid:
    """Canonical sensors on a regular grid: ``values[node, step, sensor]`` (NaN = missing)."""

    nodes: list[str]
    t0: float
    grid_s: float
    values: np.ndarray
    skipped: dict[str, int] = field(default_factory=dict)  # input rows not used, by reason
    coverage: SensorCoverage | None = None  # per-sensor share of node-steps with a value, raw names (report())

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


def _failure_time(text: str, line: int, source: str) -> float:
    """Epoch seconds from a number or an ISO-8601 time that carries its UTC offset."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ParseError("bad_time", f"time {text!r} is neither epoch seconds nor ISO 8601", line, source) from None
    if t.tzinfo is None:
        raise ParseError("bad_time", f"time {text!r} has no UTC offset: write e.g. {t.isoformat()}Z or +01:00, "
                         "or epoch seconds", line, source)
    return t.timestamp()


def load_failures(data_dir: str | Path) -> np.ndarray:
    """Ground-truth failures of ``DIR/failures.csv``: structured array ``time`` (f8), ``node``,
    ``job_id``, ``cause``, ``family`` (str; ``family`` falls back to ``cause``, lower case).

    Only ``time`` and ``node`` are required.  ``time`` is epoch seconds or ISO 8601 with
    its UTC offset (``2025-06-03T14:05:00Z``); ``node`` is a name or a hostlist
    (``c[01-04]``: a failure that took several nodes at once, one row each).

    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "failures.csv").write_text("time,node\\n2025-06-03T14:05:00Z,c[01-02]\\n1748959800.5,c07\\n")
    >>> f = load_failures(d)
    >>> f["node"].tolist(), f["time"].tolist()
    (['c01', 'c02', 'c07'], [1748959500.0, 1748959500.0, 1748959800.5])
    """
    p = Path(data_dir, "failures.csv")
    if not p.is_file():
        raise FileNotFoundError(f"no failures.csv in {data_dir}")
    with open(p, newline="", encoding="utf-8-sig") as fh:   # a spreadsheet export may start with a BOM
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or not {"time", "node"} <= set(reader.fieldnames):
            raise ParseError("bad_header", "failures.csv needs a header with the columns time,node "
                             "(job_id, cause, family optional)", 1, str(p))
        rows = []
        for r in reader:
            if not any((v or "").strip() for v in r.values() if isinstance(v, str)):
                continue
            line = reader.line_num
            when = _failure_time(r["time"] or "", line, str(p))
            try:
                nodes = expand_hostlist((r["node"] or "").strip())
            except ParseError as exc:
                raise ParseError("bad_hostlist", exc.reason, line, str(p)) from None
            if not nodes:
                raise ParseError("missing_field", "no node", line, str(p))
            cause = (r.get("cause") or "").strip()
            family = (r.get("family") or cause).strip().lower()
            rows += [(when, n, (r.get("job_id") or "").strip(), cause, family) for n in nodes]
    return np.array(rows, dtype=[("time", "f8"), ("node", "U64"), ("job_id", "U32"), ("cause", "U32"),
                                 ("family", "U32")])


def load_anomalies(data_dir: str | Path) -> np.ndarray:
    """Ground-truth anomalies: ``start``, ``end`` (f8), ``node``, ``kind`` (str), ``leads_to_failure`` (bool)."""
    p = Path(data_dir, "anomalies.csv")
    if not p.is_file():
        raise FileNotFoundError(f"no anomalies.csv in {data_dir}")
    cols = _read_table(p, ["start", "end", "node", "kind", "leads_to_failure"], ["start", "end", "leads_to_failure"])
    cols["leads_to_failure"] = cols["leads_to_failure"] > 0
    return _structured(cols, [("start", "f8"), ("end", "f8"), ("node", "U64"), ("kind", "U32"),
                              ("leads_to_failure", "?")])


def read_store_csv_arrays(path: str | Path, interfaces: tuple[str, ...] | None = None,
                          skipped: dict[str, int] | None = None) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``(times, producer names, {column: float array})`` of a whole ``store_csv`` file.

    Every header variant :func:`~hpcguard.connectors.ldms.parse_layout` reads (``#Time``,
    ``#Time_msec``, quoted names, ``userdata`` pairs, ``.HEADER`` files).  numpy's C parser
    reads a clean file; a file it cannot read (a bad row, a repeated quoted header, quoted
    values) goes through the replay's row reader :func:`~hpcguard.connectors.ldms.read_store_csv`,
    whose refused rows are counted in ``skipped`` (``ldms_<kind>``), so offline loading and
    replay keep the same rows.  Per-interface counters are summed over ``interfaces``
    (default: the ``[ldms] netdev_interfaces`` setting).

    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp(), "loadavg")
    >>> _ = p.write_text('"#Time_msec","Time_usec","ProducerName","load1min.userdata","load1min.value"\\n'
    ...                  '1558387831001,798,s0,0,0.5\\n')
    >>> t, names, cols = read_store_csv_arrays(p)
    >>> t.tolist(), names.tolist(), cols["load1min"].tolist()
    ([1558387831.001798], ['s0'], [0.5])
    """
    p = Path(path)
    with open(p, newline="") as fh:
        first = fh.readline()
    if first.startswith(("#", '"#')):
        layout, skip = parse_layout(first, str(p)), 1
    else:
        hp = find_altheader(p)
        if hp is None:
            raise ParseError("bad_header", "no header line and no .HEADER file", 1, str(p))
        with open(hp, newline="") as hfh:
            layout, skip = parse_layout(hfh.readline(), str(hp)), 0
    if interfaces is None:
        interfaces = LdmsColumns.from_settings().netdev_interfaces
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy notes an empty file
            data = np.loadtxt(p, delimiter=",", comments="#", skiprows=skip, ndmin=2, dtype=float,
                              usecols=[0, 1] + [i for _, i in layout.columns])
            names = np.loadtxt(p, delimiter=",", comments="#", skiprows=skip, usecols=(2,), ndmin=1, dtype=str)
        if data.shape[0] != names.size or any(n == "" or n.startswith('"') for n in np.unique(names)):
            raise ValueError("quoted or empty producer names")
    except ValueError:
        return _rows_to_arrays(p, layout.columns, interfaces, skipped)
    times = data[:, 0] / 1000.0 + data[:, 1] / 1e6 if layout.time_msec else data[:, 0]
    columns = {name: data[:, j] for j, (name, _) in enumerate(layout.columns, start=2)}
    # per-interface counters (rx_bytes#eth0, #ib0...) summed as the stream decoder does
    return times, names, fold_interfaces(columns, interfaces)


def _rows_to_arrays(p: Path, columns: tuple[tuple[str, int], ...], interfaces: tuple[str, ...],
                    skipped: dict[str, int] | None) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The slow path of :func:`read_store_csv_arrays`: the replay's row reader, rows it refuses counted."""
    rows = []
    for row in read_store_csv(p):
        if isinstance(row, Rejected):
            if skipped is not None:
                _count(skipped, f"ldms_{row.kind}")
        else:
            rows.append(row)
    times = np.array([r["timestamp"] for r in rows], dtype=float)
    names = np.array([r["ProducerName"] for r in rows], dtype=str)
    values = {name: np.array([r[name] for r in rows], dtype=float) for name, _ in columns}
    return times, names, fold_interfaces(values, interfaces)


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


def _count(skipped: dict[str, int], kind: str, n: int = 1) -> None:
    skipped[kind] = skipped.get(kind, 0) + n


def _ipmi_parts(f: Path, fmt: str, mapping: SensorMapping, caches: dict, coverage: SensorCoverage,
                skipped: dict[str, int], options: IpmiInput) -> list[tuple]:
    """``(hosts, times, sensor, values, True)`` parts of one IPMI file (or archive of per-node logs).

    FreeIPMI and ipmitool text goes through :func:`~hpcguard.connectors.fasrc.scan_sdr_log`
    (the decoder's row parsers, unit check and reducer); Telegraf through the per-poll
    decoder.  Bad rows are counted in ``skipped`` (``ipmi_<kind>``), never fatal.
    """
    texts: Iterable[tuple[str, str, str]]
    if is_archive(f):
        texts, fmt = iter_archive_logs(f), "ipmitool"
    else:
        texts = [(str(f), host_from_filename(f.name), f.read_text(errors="replace"))]
    parts = []
    for source, node, text in texts:
        if fmt == "telegraf":  # lines name their own nodes: the per-poll decoder
            samples, names = [], SensorCoverage(coverage.sensors)
            for env in read_ipmi_lines(text.splitlines(), source, "telegraf-lp", options):
                if not isinstance(env, dict):
                    _count(skipped, f"ipmi_{env.kind}")
                    continue
                try:
                    samples += decode_ipmi_envelope(env, mapping, coverage=names)
                except ParseError as exc:
                    _count(skipped, f"ipmi_{exc.kind}")
            coverage.merge(names, steps=False)  # the grid gives the node-steps
            flat = [(x["node"], x["time"], _SENSOR[k], v) for x in samples for k, v in x["values"].items()]
            if flat:
                n, t, s, v = zip(*flat)
                parts.append((np.asarray(n), np.asarray(t, float), np.asarray(s), np.asarray(v, float), True))
            continue
        if fmt == "freeipmi":
            layout = freeipmi_layout_of(text.splitlines()[:50])
            if layout is None:
                _count(skipped, "ipmi_bad_header")
                continue
            key = ("freeipmi", layout)
            if key not in caches:
                caches[key] = SdrLineCache(mapping, options.time_line, freeipmi_row_parser(*layout),
                                           skip=is_freeipmi_header)
        else:
            key = ("ipmitool",)
            caches.setdefault(key, SdrLineCache(mapping, options.time_line))
        untimed_at = f.stat().st_mtime if options.untimed == "mtime" else None
        scan = scan_sdr_log(text, node, caches[key], source, untimed_at)
        for r in scan.rejected:
            _count(skipped, f"ipmi_{r.kind}")
        add_scan_names(scan, caches[key], coverage)
        if scan.poll.size:
            hosts = np.asarray(scan.hosts)
            parts.append((hosts[scan.poll], scan.times[scan.poll], scan.sensor, scan.values, True))
    return parts


def load_sensor_grid(data_dir: str | Path, grid_s: float = 15.0, mapping: SensorMapping | None = None,
                     max_gap_factor: float = 5, ipmi: IpmiInput | None = None,
                     settings: Settings | None = None, poll_tolerance_s: float | None = None) -> SensorGrid:
    """The ten canonical sensors of a recorded directory on a ``grid_s`` grid.

    Nodes: ``meta.json`` ``nodes`` when present (plus any other node seen), else
    every node seen, sorted.  Time span: ``meta.json`` ``start``/``end`` or the data.
    ``ipmi/`` holds FreeIPMI / ipmitool files with poll lines, per-node ``ipmitool sdr``
    logs with timestamp lines (``<host>-YYYY-MM-DD.txt``, the FASRC layout, or a
    ``.tar.xz`` of them, streamed), or Telegraf line protocol (any file name, one node or
    many, other measurements passed over), also in sub-directories.  ``settings`` (default:
    :meth:`Settings.load() <hpcguard.settings.Settings.load>`, i.e. ``HPCGUARD_CONFIG`` and
    the environment) gives the ``[ipmi]`` input (how tool output without poll lines is
    timed, Telegraf's default host), the ``[ldms]`` interfaces and, without ``mapping``, the
    site's ``worker.sensor_map`` — as for replay and the worker; ``ipmi``
    overrides its ``[ipmi]``.  ``ldms/`` files with ``as_is`` names (``meminfo_8d2b8bd``)
    are read as their base schema; rows or metrics a file cannot give are counted in
    ``skipped`` (``ldms_<kind>``), never fatal.  The grid's ``coverage`` says how much of
    each sensor the data delivered and from which names, groups nodes by BMC family, and
    names the network interfaces that fed bytes_in/bytes_out (:mod:`~hpcguard.connectors.netdev`),
    and counts the IPMI polls moved to the next step or merged (``polls``): a poll takes its step
    by :func:`~hpcguard.models.grid.poll_steps` with ``poll_tolerance_s`` (default: the
    settings' ``worker.poll_tolerance_s``, as the worker).
    """
    d = Path(data_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"no such directory: {d}")
    settings = settings or Settings.load()
    mapping = mapping or SensorMapping.load(settings.worker.sensor_map or None)  # the worker's own mapping
    ipmi = ipmi or IpmiInput.from_settings(settings.ipmi)
    interfaces = LdmsColumns.from_settings(settings).netdev_interfaces
    tolerance = settings.worker.poll_tolerance_s if poll_tolerance_s is None else poll_tolerance_s
    meta = load_meta(d)
    # (node name array, times, sensor index, values, is_last_value[, step of each reading: placed IPMI polls])
    parts: list[tuple] = []
    skipped: dict[str, int] = {}
    coverage = SensorCoverage(families=mapping.family_of)  # groups nodes by BMC family
    for f in sorted(Path(d, "ldms").glob("*")) if Path(d, "ldms").is_dir() else []:
        spec = mapping.ldms.get(base_schema(f.name.split(".")[0], mapping.ldms))
        if spec is None or spec.io or ".HEADER" in f.name or not f.is_file():
            continue
        times, names, columns = read_store_csv_arrays(f, interfaces, skipped)
        if times.size == 0:
            continue
        net = counter_columns(spec)
        if net is not None:  # which interfaces feed bytes_in/bytes_out; is a left-out one the job network?
            coverage.add_interface_traffic(*interface_traffic(times, names, columns, max_gap_factor * spec.period_s,
                                                              net), interfaces)
        ids, keys = np.unique(names, return_inverse=True)
        for metric in spec.derive:
            if metric.canonical in _SENSOR:
                try:
                    v = derive_columns(metric, times, keys, columns, max_gap_factor * spec.period_s)
                except ParseError as exc:  # e.g. procnetdev with only 'lo': the stream dead-letters every row
                    _count(skipped, f"ldms_{exc.kind}", times.size)
                    continue
                parts.append((names, times, _SENSOR[metric.canonical], v, False))
    ipmi_dir = Path(d, "ipmi")
    caches: dict = {}
    # sub-directories too, as replay reads them (ipmi/<node>/metrics.out: Telegraf file outputs gathered per node)
    for f in sorted(ipmi_dir.rglob("*")) if ipmi_dir.is_dir() else []:
        if not f.is_file():
            continue
        fmt = "ipmitool" if is_archive(f) else detect_format(f)
        if fmt in ("freeipmi", "ipmitool", "telegraf"):
            parts += _ipmi_parts(f, fmt, mapping, caches, coverage, skipped, ipmi)
        else:
            _count(skipped, "ipmi_unknown_format")
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
    polls = [p for p in parts if p[4]]  # IPMI: one part, its polls placed as the worker places them
    parts = [p for p in parts if not p[4]]
    if polls:
        parts.append(_placed_polls(polls, node_index, grid_s, tolerance, coverage))
    for names, times, sensor, values, is_last, *placed in parts:
        uniq, inv = np.unique(names, return_inverse=True)
        node = np.array([node_index[str(u)] for u in uniq], dtype=np.int64)[inv]
        step = (placed[0] if placed else np.floor(times / grid_s).astype(np.int64)) - int(round(t0 / grid_s))
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
    coverage.add_grid(nodes, values)
    return SensorGrid(nodes=nodes, t0=float(t0), grid_s=float(grid_s), values=values, skipped=skipped,
                      coverage=coverage)


def _placed_polls(parts: list[tuple], node_index: dict[str, int], grid_s: float, tolerance_s: float,
                  coverage: SensorCoverage) -> tuple:
    """The IPMI ``parts`` as one part with each reading's step (:func:`~hpcguard.models.grid.place_readings`).

    A poll is a node's readings at one time (with a value; others are dropped, as the worker
    drops them); each node's polls are placed in time order, as the worker's grid does when
    their steps close.  ``coverage`` gets each node's polls, moved and merged."""
    names = np.concatenate([np.asarray(p[0]).astype(str) for p in parts])
    times = np.concatenate([p[1] for p in parts])
    sensor = np.concatenate([np.broadcast_to(p[2], p[1].shape) for p in parts])
    values = np.concatenate([p[3] for p in parts])
    ok = np.isfinite(values)
    names, times, sensor, values = names[ok], times[ok], sensor[ok], values[ok]
    uniq, inv = np.unique(names, return_inverse=True)
    node = np.array([node_index[str(u)] for u in uniq], dtype=np.int64)[inv]
    step, counts = place_readings(node, times, grid_s, tolerance_s, len(node_index))
    names_of = list(node_index)
    for i in np.flatnonzero(counts[:, 0]):
        coverage.add_polls(names_of[i], "ipmi", *counts[i].tolist())
    return names, times, sensor, values, True, step
