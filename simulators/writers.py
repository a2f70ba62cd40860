"""Writers of the recorded-data directory (``docs/formats.md``) for simulated telemetry.

LDMS ``store_csv`` (optionally with the header in a ``.HEADER`` file), FreeIPMI
``ipmi-sensors --comma-separated-output`` or ``ipmitool sdr elist`` blocks (by the
node's hardware generation) with ``# hpcguard-poll`` lines, Slurm
``sacct --parsable2`` (jobs and their ``.batch``/``.extern`` steps), the ground-truth
``failures.csv``/``anomalies.csv`` and ``meta.json``.  Rows are built with one C-level
``%`` formatting per chunk of rows (no per-value Python work), so 230 k
``lustre_client`` rows write in about a second.

Example
-------
>>> format_rows("%d|%.1f\\n", np.array([[1, 2.0], [3, 4.5]]))
'1|2.0\\n3|4.5\\n'
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Sequence

import numpy as np

from hpcguard.connectors.hostlist import compress_hostlist
from hpcguard.connectors.slurm_events import event_text
from hpcguard.simulators.profiles import GENERATIONS

SACCT_HEADER = "JobID|JobName|User|Partition|NNodes|NodeList|Submit|Start|End|Timelimit|State|ExitCode"
IPMI_HEADER = "ID,Name,Type,Reading,Units,Event"
LDMS_FIXED = ("Time", "Time_usec", "ProducerName", "component_id", "job_id")
_EXIT = {"COMPLETED": "0:0", "FAILED": "1:0", "TIMEOUT": "0:0", "NODE_FAIL": "0:0", "RUNNING": "0:0",
         "PENDING": "0:0"}
_CHUNK = 20000

# LDMS schemas: name -> (period_s, metric columns)
LDMS_SCHEMAS: dict[str, tuple[int, tuple[str, ...]]] = {
    "lustre_client": (1, ("read_bytes", "write_bytes")),
    "procstat": (15, ("cpu_user", "cpu_nice", "cpu_sys", "cpu_idle", "cpu_iowait")),
    "loadavg": (15, ("load1min", "load5min", "load15min")),
    "meminfo": (15, ("MemTotal", "MemFree", "MemAvailable")),
    "diskusage": (15, ("used_kb", "size_kb")),
    "procnetdev": (15, ("rx_bytes#eth0", "tx_bytes#eth0")),
}

# BMC sensors: (record id, name, type, units); the discrete one reads N/A with an event.
IPMI_SENSORS: tuple[tuple[int, str, str, str], ...] = (
    (1, "Inlet Temp", "Temperature", "C"),
    (2, "System Temp", "Temperature", "C"),
    (3, "CPU1 Temp", "Temperature", "C"),
    (4, "CPU2 Temp", "Temperature", "C"),
    (5, "PS1 Temp", "Temperature", "C"),
    (6, "PS2 Temp", "Temperature", "C"),
    (7, "Vcore", "Voltage", "V"),
    (8, "12V", "Voltage", "V"),
    (9, "FAN1A", "Fan", "RPM"),
    (10, "FAN1B", "Fan", "RPM"),
    (11, "FAN2A", "Fan", "RPM"),
    (12, "FAN2B", "Fan", "RPM"),
)
IPMI_DISCRETE: tuple[tuple[int, str, str, str, str], ...] = (
    (13, "PS1 Status", "Power Supply", "N/A", "'Presence detected'"),
)


def format_rows(row_fmt: str, table: np.ndarray, chunk: int = _CHUNK) -> str:
    """Format every row of a 2-D numeric table with one ``%`` template (chunked)."""
    parts = []
    for i in range(0, table.shape[0], chunk):
        block = table[i:i + chunk]
        parts.append((row_fmt * block.shape[0]) % tuple(block.ravel().tolist()))
    return "".join(parts)


def _slurm_time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(np.floor(t))))


def _slurm_limit(seconds: float) -> str:
    s = int(round(seconds))
    d, rest = divmod(s, 86400)
    hms = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{d}-{hms}" if d else hms


# --------------------------------------------------------------------------- LDMS
def write_ldms_csv(path: str, metrics: Sequence[str], metric_fmts: Sequence[str], start: float, period: int,
                   values: np.ndarray, up: np.ndarray, usec: np.ndarray, job_id: np.ndarray, name_width: int,
                   altheader: bool = False) -> int:
    """Write one LDMS ``store_csv`` schema file, rows in time order; returns the row count.

    ``values`` is ``(N, T, M)``; rows where ``up`` is false are not written (missing).
    """
    N, T, M = values.shape
    header = "#" + ",".join(LDMS_FIXED + tuple(metrics)) + "\n"
    sec = int(start) + period * np.arange(T)
    # time-major order: (T, N) then drop down nodes
    mask = up.T.ravel()
    comp = np.broadcast_to(np.arange(1, N + 1)[None, :], (T, N)).ravel()[mask]
    table = np.column_stack([
        np.broadcast_to(sec[:, None], (T, N)).ravel()[mask], usec.T.ravel()[mask], usec.T.ravel()[mask],
        comp, comp, job_id.T.ravel()[mask], values.transpose(1, 0, 2).reshape(T * N, M)[mask],
    ])
    row_fmt = f"%d.%06d,%d,n%0{name_width}d,%d,%d," + ",".join(metric_fmts) + "\n"
    text = format_rows(row_fmt, table)
    if altheader:
        with open(os.path.splitext(path)[0] + ".HEADER", "w") as fh:
            fh.write(header)
        header = ""
    with open(path, "w") as fh:
        fh.write(header)
        fh.write(text)
    return int(mask.sum())


# --------------------------------------------------------------------------- IPMI
def write_ipmi_node(path: str, node: str, start: float, readings: np.ndarray, up: np.ndarray, ms: np.ndarray,
                    sensors: Sequence[tuple[int, str, str, str]],
                    discrete: Sequence[tuple[int, str, str, str, str]] = ()) -> int:
    """FreeIPMI comma-separated blocks, one per 15 s poll, each after a poll line; returns polls."""
    idx = np.flatnonzero(up)
    vals = readings[idx]
    sec = int(start) + 15 * idx
    poll = f"# hpcguard-poll host={node} time=%d.%03d\n{IPMI_HEADER}\n"
    lines = [f"{sid},{name},{typ},%.2f,{units},'OK'\n" for sid, name, typ, units in sensors]
    tail = "".join(f"{sid},{name},{typ},N/A,{units},{event}\n" for sid, name, typ, units, event in discrete)
    tail = tail.replace("%", "%%")
    na = [f"{sid},{name},{typ},N/A,{units},N/A\n" for sid, name, typ, units in sensors]
    _write_polls(path, np.column_stack([sec, ms[idx], vals]), poll, lines, na, tail)
    return int(idx.size)


def _write_polls(path: str, table: np.ndarray, poll: str, ok: Sequence[str], missing_line: Sequence[str],
                 tail: str) -> None:
    """Poll blocks from ``table`` rows ``(second, ms, reading...)``: ``poll``, one line per sensor
    (``ok[i]`` with its %-format, ``missing_line[i]`` for a NaN reading), then ``tail``.  No rows, no
    file: an empty log is no format a reader knows (a node whose BMC never answered has none)."""
    if not len(table):
        return
    vals = table[:, 2:]
    full = poll + "".join(ok) + tail
    parts, prev = [], 0
    for r in np.flatnonzero(np.isnan(vals).any(axis=1)):  # rare polls with a missing reading get their own template
        parts.append(format_rows(full, table[prev:r]))
        missing = np.isnan(vals[r])
        fmt = poll + "".join(missing_line[i] if missing[i] else ok[i] for i in range(len(ok))) + tail
        parts.append(fmt % tuple(table[r][np.concatenate([[True, True], ~missing])].tolist()))
        prev = r + 1
    parts.append(format_rows(full, table[prev:]))
    with open(path, "w") as fh:
        fh.write("".join(parts))


_IPMITOOL_UNITS = {"C": "degrees C", "V": "Volts", "RPM": "RPM"}
_IPMITOOL_FMT = {"C": "%d", "V": "%.2f", "RPM": "%d"}


def write_ipmitool_node(path: str, node: str, start: float, readings: np.ndarray, up: np.ndarray, ms: np.ndarray,
                        sensors: Sequence[tuple[str, str, str, str, str]],
                        discrete: Sequence[tuple[str, str, str]] = ()) -> int:
    """``ipmitool sdr elist`` blocks, one per poll, each after a poll line; returns polls.

    ``sensors`` rows are ``(role, name, type, units, entity)`` (units ``C``/``V``/``RPM``),
    ``readings`` ``(T, len(sensors))`` with NaN for ``No Reading``.

    >>> import tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "n1.txt")
    >>> write_ipmitool_node(f, "n1", 0.0, np.array([[45.0, np.nan]]), np.array([True]), np.array([250]),
    ...                     [("cpu1", "Temp", "Temperature", "C", "3.1"), ("fan1", "Fan1A RPM", "Fan", "RPM", "7.1")])
    1
    >>> print(open(f).read(), end="")
    # hpcguard-poll host=n1 time=0.250
    Temp             | 01h | ok  |  3.1 | 45 degrees C
    Fan1A RPM        | 02h | ns  |  7.1 | No Reading
    """
    idx = np.flatnonzero(up)
    vals = readings[idx]
    poll = f"# hpcguard-poll host={node} time=%d.%03d\n"
    ok = [f"{name:<16} | {i + 1:02X}h | ok  | {ent:>4} | {_IPMITOOL_FMT[u]} {_IPMITOOL_UNITS[u]}\n"
          for i, (_, name, _, u, ent) in enumerate(sensors)]
    ns = [f"{name:<16} | {i + 1:02X}h | ns  | {ent:>4} | No Reading\n" for i, (_, name, _, _, ent) in enumerate(sensors)]
    tail = "".join(f"{name:<16} | {len(sensors) + i + 1:02X}h | ok  | {ent:>4} | {state}\n"
                   for i, (name, ent, state) in enumerate(discrete)).replace("%", "%%")
    _write_polls(path, np.column_stack([int(start) + 15 * idx, ms[idx], vals]), poll, ok, ns, tail)
    return int(idx.size)


# --------------------------------------------------------------------------- Slurm
def sacct_text(jobs: dict, start: float) -> str:
    """``sacct --parsable2`` text of the visible jobs with their batch/extern steps.

    Job times in ``jobs`` are seconds from ``start`` (epoch); sacct prints UTC.
    """
    rows = [SACCT_HEADER]
    for i in np.flatnonzero(jobs["visible"]):
        state = str(jobs["state"][i])
        started = np.isfinite(jobs["start"][i])
        ended = state not in ("RUNNING", "PENDING")
        names = [n for n in str(jobs["nodes"][i]).split(",") if n]
        nodelist = compress_hostlist(names) if names else "None assigned"
        t_start = _slurm_time(start + jobs["start"][i]) if started else "Unknown"
        t_end = _slurm_time(start + jobs["end"][i]) if ended else "Unknown"
        jid = int(jobs["job_id"][i])
        rows.append("|".join([str(jid), str(jobs["name"][i]), str(jobs["user"][i]), "batch",
                              str(int(jobs["num_nodes"][i])), nodelist, _slurm_time(start + jobs["submit"][i]), t_start,
                              t_end, _slurm_limit(jobs["timelimit_s"][i]), state, _EXIT[state]]))
        if started:
            step_state = {"NODE_FAIL": "CANCELLED", "TIMEOUT": "CANCELLED"}.get(state, state)
            step_exit = "1:0" if state == "FAILED" else "0:15" if step_state == "CANCELLED" else "0:0"
            rows.append("|".join([f"{jid}.batch", "batch", "", "", "1", names[0], t_start, t_start, t_end, "",
                                  step_state, step_exit]))
            rows.append("|".join([f"{jid}.extern", "extern", "", "", str(len(names)), nodelist, t_start, t_start,
                                  t_end, "", "COMPLETED" if ended else "RUNNING", "0:0"]))
    return "\n".join(rows) + "\n"


def sacctmgr_event_text(events: Sequence[dict], start: float, nodes: Sequence[str]) -> str:
    """``sacctmgr -n -P show event Format=NodeName,TimeStart,TimeEnd,State,Reason,User`` text of
    node events (times in seconds from ``start``, nodes as indices into ``nodes``; UTC).

    >>> print(sacctmgr_event_text([{"node": 0, "start": 60.0, "end": None, "state": "DOWN*",
    ...                             "reason": "Not responding", "user": "slurm(64030)"}], 0.0, ["n001"]), end="")
    n001|1970-01-01T00:01:00|Unknown|DOWN*|Not responding|slurm(64030)
    """
    return event_text({**e, "node": nodes[e["node"]], "start": start + e["start"],
                       "end": None if e.get("end") is None else start + e["end"]} for e in events)


# --------------------------------------------------------------------------- everything
LDMS_FORMATS = {
    "lustre_client": ("%d", "%d"),
    "procstat": ("%d",) * 5,
    "loadavg": ("%.2f",) * 3,
    "meminfo": ("%d",) * 3,
    "diskusage": ("%d",) * 2,
    "procnetdev": ("%d", "%d"),
}


def write_recording(tel: Any, out_dir: str, altheader: bool = False, io: bool = True,
                    slurm_events: bool = False) -> dict:
    """Write ``tel`` (a :class:`~hpcguard.simulators.telemetry.Telemetry`) as a recorded-data directory;
    returns the summary written to meta.json.

    ``io=False`` leaves out the 1 s ``lustre_client`` file (three quarters of the bytes;
    the failure model's ten sensors do not use it, CanarIO does).  ``slurm_events=True``
    adds ``slurm/events.txt``, Slurm's node events as ``sacctmgr -n -P show event
    Format=NodeName,TimeStart,TimeEnd,State,Reason,User`` prints them (``hpcguard label
    --events``); off by default, as the replay and the readers of ``slurm/`` take every file
    there for a sacct dump.
    """
    for sub in ("ldms", "ipmi", "slurm"):
        os.makedirs(os.path.join(out_dir, sub), exist_ok=True)
    width = len(tel.nodes[0]) - 1
    files = []
    schemas = {s: v for s, v in LDMS_SCHEMAS.items() if io or s != "lustre_client"}
    for schema, (period, metrics) in schemas.items():
        if period == 1:
            vals, up, usec, job = tel.lustre, tel.up1, tel.usec1, tel.job1
        else:
            vals, up, usec, job = tel.ldms15[schema], tel.ldms_mask, tel.usec15, tel.job15
        path = os.path.join(out_dir, "ldms", f"{schema}.csv")
        write_ldms_csv(path, metrics, LDMS_FORMATS[schema], tel.start, period, vals, up, usec, job, width,
                       altheader)
        files.append(f"ldms/{schema}.csv")
        if altheader:
            files.append(f"ldms/{schema}.HEADER")
    ipmi_up = tel.ipmi_mask
    for n, node in enumerate(tel.nodes):
        gen = GENERATIONS.get(tel.hardware[n]) if tel.hardware else None
        readings = tel.ipmi[n][:, tel.ipmi_columns(n)]
        if gen is None:  # classic
            name = f"ipmi/{node}.csv"
            polls = write_ipmi_node(os.path.join(out_dir, name), node, tel.start, readings, ipmi_up[n],
                                    tel.ipmi_ms[n], IPMI_SENSORS, IPMI_DISCRETE)
        elif gen.format == "freeipmi-csv":
            name = f"ipmi/{node}.csv"
            sensors = [(i + 1, s[1], s[2], s[3]) for i, s in enumerate(gen.sensors)]
            discrete = [(len(sensors) + i + 1, d[0], "OEM Reserved", "N/A", d[2]) for i, d in enumerate(gen.discrete)]
            polls = write_ipmi_node(os.path.join(out_dir, name), node, tel.start, readings, ipmi_up[n],
                                    tel.ipmi_ms[n], sensors, discrete)
        else:
            name = f"ipmi/{node}.txt"
            polls = write_ipmitool_node(os.path.join(out_dir, name), node, tel.start, readings, ipmi_up[n],
                                        tel.ipmi_ms[n], gen.sensors, gen.discrete)
        if polls:
            files.append(name)
    with open(os.path.join(out_dir, "slurm", "sacct.txt"), "w") as fh:
        fh.write(sacct_text(tel.jobs, tel.start))
    files.append("slurm/sacct.txt")
    if slurm_events and tel.node_events:  # no events: no file (a replay names an empty file as such)
        with open(os.path.join(out_dir, "slurm", "events.txt"), "w") as fh:
            fh.write(sacctmgr_event_text(tel.node_events, tel.start, tel.nodes))
        files.append("slurm/events.txt")
    with open(os.path.join(out_dir, "failures.csv"), "w") as fh:
        fh.write("time,node,job_id,cause,family,onset_minutes,onset_time\n")
        for f in tel.failures:
            fh.write(f"{tel.start + f['time']:.3f},{tel.nodes[f['node']]},{f['job_id'] or ''},{f['cause']},"
                     f"{f['family']},{(f['time'] - f['onset_time']) / 60.0:.2f},{tel.start + f['onset_time']:.3f}\n")
    with open(os.path.join(out_dir, "anomalies.csv"), "w") as fh:
        fh.write("start,end,node,kind,leads_to_failure,family\n")
        for a in tel.anomalies:
            fh.write(f"{tel.start + a['start']:.3f},{tel.start + a['end']:.3f},{tel.nodes[a['node']]},"
                     f"{a['kind']},{a['leads_to_failure']},{a['family']}\n")
    files += ["failures.csv", "anomalies.csv", "meta.json"]
    summary = tel.summary()
    summary.update({
        "schemas": {s: {"period_s": p, "metrics": list(m)} for s, (p, m) in schemas.items()},
        "ipmi_sensors": list(dict.fromkeys(
            name for g in summary["generations"].values() for name in g["sensors"] + g["discrete"])),
        "altheader": altheader, "files": files,
    })
    with open(os.path.join(out_dir, "meta.json"), "w") as fh:
        json.dump(summary, fh, indent=2)
        fh.write("\n")
    return summary
