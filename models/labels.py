"""Failure labels from what a site already has: Slurm's word and nodes that go silent.

A site has no ``failures.csv``.  It has Slurm accounting (jobs that ended ``NODE_FAIL``),
Slurm's node events (``sacctmgr show event``, or node states seen by a poller: ``DOWN``,
``NOT_RESPONDING`` (``*``), ``FAIL``, ``DRAIN`` with a reason) and the telemetry itself (a
node that stops reporting for much longer than its own normal gaps).
:func:`failure_labels` turns that evidence into failures: node, time, sources, confidence.

Evidence
--------
``node_fail``
    A job whose state is ``NODE_FAIL``, at its end time, on the nodes sacct lists.  sacct
    names the job's whole allocation, not the node that failed: on a one-node job the
    evidence is 0.8.  On an ``n``-node job the nodes with other evidence that they stopped
    (a silence, a ``DOWN`` event) near the job's end are the failed ones and keep 0.8; the
    others lose it (:func:`resolve_node_fail`).  Without such evidence each node gets
    ``0.8 / n``.
``event``
    A Slurm node event, by state (:func:`event_confidence`): ``DOWN``/``FAIL`` 0.8, not
    responding (``*``, ``NOT_RESPONDING``) 0.6; a failure-like reason (``Not responding``,
    ``Node unexpectedly rebooted``, ECC, thermal, NHC ...) raises these to 0.9.  ``DRAIN``,
    ``FAILING`` and ``ERROR`` mean the node still runs: 0.2, 0.45 with a failure-like
    reason, never a failure on their own.  An administrative reason (maintenance,
    upgrade, ``Reboot ASAP``, power saving, test) and any other state (``IDLE``, ``MAINT``,
    ``BOOT``, power-save ``~``/``#``/``%``/``!``) are no evidence.
``silence``
    A node whose samples stop for longer than ``max(silence_factor × q, min_silence_s)``,
    ``q`` the ``silence_quantile`` of its own gaps between samples (the gaps a healthy node
    of that site has: missed polls, collector jitter): 0.6, from its last sample.  A
    silence that runs to ``end_time`` counts too.  When at least ``collector_share`` of the
    nodes (and ``collector_min_nodes``) are silent at once, the collector went quiet, not the
    nodes: 0.1, so only Slurm's word can make it a failure.

Merging
-------
Evidence on one node belongs to one failure when it starts within ``window_s`` of evidence
already in it, or while the node is still down by an earlier piece (a silence until the
node's next sample, a ``DOWN`` event until its ``TimeEnd``).  A failure's confidence is the
noisy-or of its evidence kinds (each kind's strongest piece): ``1 − Π(1 − c)``.  Its time is
the earliest evidence that says the node stopped (silence, ``node_fail``, ``DOWN``), else its
earliest evidence: a silence starts at the last sample before the failure, Slurm's ``DOWN``
comes after its ping timeout.  Failures below ``min_confidence`` are dropped.

Example
-------
>>> jobs = [{"job_id": "41", "state": "NODE_FAIL", "end_time": 1000.0, "nodes": ["c1", "c2"]}]
>>> events = [{"node": "c2", "start": 1090.0, "end": 2500.0, "state": "DOWN*", "reason": "Not responding"}]
>>> t = np.arange(0.0, 3000.0, 15.0)
>>> up = (t < 985.0) | (t > 2400.0)          # c2 stops reporting from 990 s to 2400 s
>>> seen = {"c1": t, "c2": t[up], "c3": t, "c4": t}
>>> names, times = np.concatenate([[n] * len(v) for n, v in seen.items()]), np.concatenate(list(seen.values()))
>>> lab = failure_labels(jobs, events, (names, times))
>>> lab[["node", "time", "source", "job_id"]].tolist()
[('c2', 975.0, 'event+node_fail+silence', '41')]
>>> round(float(lab["confidence"][0]), 3)
0.992
>>> match_labels(lab, np.array([(990.0, "c2")], dtype=[("time", "f8"), ("node", "U8")]))["recall"]
1.0
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from hpcguard.models.jobs import NODE_STATE

#: kinds of evidence, in the order ``source`` names them
KINDS = ("event", "node_fail", "silence")
NODE_FAIL_CONFIDENCE = 0.8
SILENCE_CONFIDENCE = 0.6
COLLECTOR_CONFIDENCE = 0.1
EVIDENCE_DTYPE = [("node", "U64"), ("start", "f8"), ("end", "f8"), ("kind", "U16"), ("confidence", "f8"),
                  ("stop", "?"), ("candidates", "i4"), ("job_id", "U32"), ("reason", "U160")]
LABEL_DTYPE = [("time", "f8"), ("node", "U64"), ("job_id", "U32"), ("source", "U40"), ("confidence", "f8"),
               ("reason", "U160")]

_FLAGS = "*~#$@^!%-"            # compact state suffixes: * not responding, ~ # % ! power, $ maint, @ ^ reboot
_POWER_FLAGS = "~#%!"
_POWER_STATES = {"POWERED_DOWN", "POWER_DOWN", "POWERING_DOWN", "POWERING_UP", "POWER_UP", "POWER_SAVE",
                 "POWERED_OFF", "CLOUD"}
_DOWN_STATES = {"DOWN", "FAIL"}
_NO_RESPOND = {"NOT_RESPONDING", "NO_RESPOND", "NOT_RESPONDING*"}
_WEAK_STATES = {"DRAIN", "DRAINED", "DRAINING", "DRNG", "FAILING", "FAILG", "ERROR"}
_FAILURE_REASON = re.compile(
    r"not respond|unexpected\w* reboot|kill task failed|health ?check|\bnhc\b|hardware|\bhw\b|\becc\b|\bmce\b|"
    r"machine check|memory error|\bdimms?\b|thermal|overheat|temperature|\bfans?\b|power supply|\bpsu\b|voltage|"
    r"\bgpus?\b|\bxid\b|infiniband|\bib\b|link (?:down|flap)|\bdisks?\b|\bnvme\b|\bssd\b|lustre|gpfs|panic|crash|"
    r"\bhung\b|lockup|\boom\b|out of memory|epilog|prolog|batch job complete failure|low (?:real)?memory|"
    r"low socket|\bfail|\berror|\bbroken\b|\bdead\b|\bdied\b|\bbad\b", re.I)
_OWN_REASON = re.compile(r"hpcguard [\w.:-]+: ")
_ADMIN_REASON = re.compile(
    r"maint|upgrad|updat|firmware|\bbios\b|kernel|\bimage\b|reimag|reinstall|scheduled|planned|\btest|benchmark|"
    r"reserv|decommission|retir|power[ _-]?(?:save|saving|down|off|up)|reboot (?:asap|requested|issued)|"
    r"\brebooting\b|\badmin\b|\bresum", re.I)


@dataclass(frozen=True)
class LabelParams:
    """How evidence becomes failures (see the module docstring).

    Parameters
    ----------
    window_s
        Evidence on one node this close in time is one failure (the issue's 5 min).
    silence_quantile, silence_factor, min_silence_s
        A silence is a gap longer than ``max(silence_factor × quantile of the node's own
        gaps, min_silence_s)``.
    collector_share, collector_min_nodes
        A silence shared by at least this share of the nodes (of a cluster with at least
        this many) is the collector's, not the node's.
    min_confidence
        Failures below this confidence are dropped.
    """

    window_s: float = 300.0
    silence_quantile: float = 0.99
    silence_factor: float = 4.0
    min_silence_s: float = 120.0
    collector_share: float = 0.5
    collector_min_nodes: int = 4
    min_confidence: float = 0.5

    def __post_init__(self) -> None:
        checks = [(self.window_s >= 0, f"window_s must be >= 0 (got {self.window_s})"),
                  (0.0 < self.silence_quantile <= 1.0, f"silence_quantile must be in (0, 1] (got {self.silence_quantile})"),
                  (self.silence_factor >= 1.0, f"silence_factor must be >= 1 (got {self.silence_factor})"),
                  (self.min_silence_s > 0, f"min_silence_s must be > 0 (got {self.min_silence_s})"),
                  (0.0 < self.collector_share <= 1.0, f"collector_share must be in (0, 1] (got {self.collector_share})"),
                  (self.collector_min_nodes >= 1, "collector_min_nodes must be >= 1"),
                  (0.0 <= self.min_confidence <= 1.0, f"min_confidence must be in [0, 1] (got {self.min_confidence})")]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


def _parts(state: str) -> tuple[set[str], str]:
    """Base states of a Slurm state text (``DOWN*``, ``IDLE+DRAIN``, ``MIXED~``) and its flag characters."""
    text = state.strip().upper()
    flags = "".join(ch for ch in text if ch in _FLAGS)
    parts = {p.strip().rstrip(_FLAGS) for p in re.split(r"[+,]", text) if p.strip()}
    return parts, flags


def event_confidence(state: str, reason: str = "") -> tuple[float, bool]:
    """``(confidence, stopped)`` of a Slurm node event: how much it says the node failed, and
    whether it says the node stopped (down, not responding) rather than still runs (drain).

    >>> event_confidence("DOWN*", "Not responding"), event_confidence("DOWN", "kernel upgrade")
    ((0.9, True), (0.0, False))
    >>> event_confidence("DRAIN", "Kill task failed"), event_confidence("IDLE~"), event_confidence("MIXED*")
    ((0.45, False), (0.0, False), (0.6, True))
    >>> event_confidence("DRAIN", "hpcguard act-1f2e: fan failure predicted")
    (0.0, False)
    """
    if _OWN_REASON.match(reason or ""):
        return 0.0, False  # hpcguard's own drain (connectors.slurm.drain_reason): its warning, not Slurm's word
    parts, flags = _parts(state)
    failure = bool(_FAILURE_REASON.search(reason or ""))
    if not failure and _ADMIN_REASON.search(reason or ""):
        return 0.0, False
    if parts & _POWER_STATES or any(f in flags for f in _POWER_FLAGS):
        return 0.0, False
    if parts & _DOWN_STATES:
        return (0.9 if failure else 0.8), True
    if "*" in flags or parts & _NO_RESPOND:
        return (0.9 if failure else 0.6), True
    if parts & _WEAK_STATES:
        return (0.45 if failure else 0.2), False
    return 0.0, False


def _evidence(rows: list[tuple]) -> np.ndarray:
    return np.array(rows, dtype=EVIDENCE_DTYPE) if rows else np.zeros(0, dtype=EVIDENCE_DTYPE)


def job_evidence(jobs: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """Evidence of the ``NODE_FAIL`` jobs among ``jobs`` (mappings with ``job_id``, ``state``,
    ``end_time``, ``nodes``: the records of :func:`hpcguard.connectors.sacct.read_sacct`);
    other jobs, and jobs without an end or nodes, give none."""
    rows = []
    for job in jobs:
        state = str(job.get("state", "")).split(" ")[0].upper()
        end, nodes = job.get("end_time"), [str(n) for n in job.get("nodes") or ()]
        if state not in ("NODE_FAIL", "NF") or end is None or not nodes or not math.isfinite(float(end)):
            continue
        for node in dict.fromkeys(nodes):
            rows.append((node, float(end), np.nan, "node_fail", NODE_FAIL_CONFIDENCE, True, len(set(nodes)),
                         str(job.get("job_id", "")), "NODE_FAIL"))
    return _evidence(rows)


def event_evidence(events: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """Evidence of Slurm node events: mappings with ``node``, ``start`` (epoch s), ``state``
    and optionally ``end`` (``None``: still open), ``reason``.  Events that say nothing of a
    failure (:func:`event_confidence` 0) give none."""
    rows = []
    for ev in events:
        start = ev.get("start")
        if start is None or not math.isfinite(float(start)):
            continue
        reason = str(ev.get("reason") or "")
        conf, stop = event_confidence(str(ev.get("state", "")), reason)
        if conf <= 0.0:
            continue
        end = ev.get("end")
        # a stopped node stays down until the event ends; a drain is a moment
        until = (np.inf if end is None else max(float(end), float(start))) if stop else np.nan
        rows.append((str(ev["node"]), float(start), until, "event", conf, stop, 1, "",
                     f"{str(ev.get('state', '')).strip()}: {reason}".strip().rstrip(":")))
    return _evidence(rows)


def normal_gaps(names: np.ndarray, times: np.ndarray, quantile: float = 0.99, min_gaps: int = 10
                ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Each node's normal gap between samples: ``(nodes, gap quantile, gaps)``.

    ``gaps`` holds every gap (``node`` index, ``start``, ``end``) of the de-duplicated,
    time-ordered samples.  A node with fewer than ``min_gaps`` gaps gets the median of the
    others (NaN when no node has enough).

    >>> nodes, q, _ = normal_gaps(np.array(["a"] * 20 + ["b"] * 3), np.r_[np.arange(20.0) * 15, 0.0, 1.0, 2.0])
    >>> nodes.tolist(), q.tolist()
    (['a', 'b'], [15.0, 15.0])
    """
    names = np.asarray(names).astype(str)
    times = np.asarray(times, dtype=float)
    ok = np.isfinite(times)
    nodes, inv = np.unique(names[ok], return_inverse=True)
    t_ok = times[ok]
    order = np.lexsort((t_ok, inv))
    node, t = inv[order], t_ok[order]
    keep = np.ones(node.size, bool)
    keep[1:] = (node[1:] != node[:-1]) | (t[1:] != t[:-1])  # one sample per node and time
    node, t = node[keep], t[keep]
    same = node[1:] == node[:-1]
    g_node, g_start, g_end = node[1:][same], t[:-1][same], t[1:][same]
    gap = g_end - g_start
    counts = np.bincount(g_node, minlength=nodes.size)
    sorted_gap = gap[np.lexsort((gap, g_node))]
    first = np.cumsum(counts) - counts
    enough = counts >= min_gaps
    q = np.full(nodes.size, np.nan)
    pick = first[enough] + np.floor(quantile * (counts[enough] - 1)).astype(np.int64)
    q[enough] = sorted_gap[pick]
    if enough.any():
        q[~enough] = np.median(q[enough])
    last = np.full(nodes.size, np.nan)
    if node.size:
        tail = np.ones(node.size, bool)
        tail[:-1] = node[1:] != node[:-1]
        last[node[tail]] = t[tail]
    return nodes, q, {"node": g_node, "start": g_start, "end": g_end, "last": last}


def silence_evidence(names: Sequence[str] | np.ndarray, times: Sequence[float] | np.ndarray,
                     end_time: Optional[float] = None, params: Optional[LabelParams] = None) -> np.ndarray:
    """Evidence of nodes going silent: ``names[i]`` reported at ``times[i]`` (epoch s).

    A silence runs from a node's last sample to its next one, or to ``end_time`` (default:
    the last sample of any node) when it never reported again.

    >>> t = np.arange(0.0, 1200.0, 15.0)
    >>> seen = {"a": t, "b": t[(t < 300) | (t > 900)], "c": t, "d": t[t < 950]}
    >>> names, times = np.concatenate([[n] * len(v) for n, v in seen.items()]), np.concatenate(list(seen.values()))
    >>> ev = silence_evidence(names, times)
    >>> ev[["node", "start", "end", "confidence"]].tolist()
    [('b', 285.0, 915.0, 0.6), ('d', 945.0, inf, 0.6)]
    """
    p = params or LabelParams()
    nodes, q, gaps = normal_gaps(names, times, p.silence_quantile)
    if nodes.size == 0:
        return _evidence([])
    fallback = p.min_silence_s / p.silence_factor
    threshold = np.maximum(p.silence_factor * np.where(np.isfinite(q), q, fallback), p.min_silence_s)
    g_node = gaps["node"]
    silent = (gaps["end"] - gaps["start"]) > threshold[g_node]
    s_node, s_start, s_end = g_node[silent], gaps["start"][silent], gaps["end"][silent]
    last = gaps["last"]
    horizon = float(np.nanmax(last)) if end_time is None else float(end_time)
    trailing = np.flatnonzero(np.isfinite(last) & (horizon - last > threshold))
    s_node = np.concatenate([s_node, trailing])
    s_start = np.concatenate([s_start, last[trailing]])
    s_end = np.concatenate([s_end, np.full(trailing.size, np.inf)])
    if s_node.size == 0:
        return _evidence([])
    # how many nodes are silent at the moment each silence becomes one (its threshold passed)
    at = s_start + threshold[s_node]
    active = (np.searchsorted(np.sort(s_start), at, side="right")
              - np.searchsorted(np.sort(s_end), at, side="right"))
    collector = (nodes.size >= p.collector_min_nodes) & (active >= p.collector_share * nodes.size)
    conf = np.where(collector, COLLECTOR_CONFIDENCE, SILENCE_CONFIDENCE)
    rows = []
    for i in np.argsort(s_start, kind="stable"):
        n, a, b = int(s_node[i]), float(s_start[i]), float(s_end[i])
        what = f"silent {b - a:.0f} s" if math.isfinite(b) else "silent to the end of the records"
        what += f" (normal gap {q[n]:.0f} s)" if math.isfinite(q[n]) else ""
        if collector[i]:
            what += f"; {int(active[i])} of {nodes.size} nodes silent at once: collector outage?"
        rows.append((str(nodes[n]), a, b, "silence", float(conf[i]), True, 1, "", what))
    return _evidence(rows)


def resolve_node_fail(evidence: np.ndarray, window_s: float = 300.0, tie_s: float = 60.0) -> np.ndarray:
    """``evidence`` with each ``NODE_FAIL`` job pinned to the nodes that failed.

    sacct lists a ``NODE_FAIL`` job's whole allocation.  The nodes among them with other
    evidence that they stopped (a silence, a ``DOWN`` or not-responding event) starting within
    ``window_s`` of the job's end are the failed ones: those nearest in time (within
    ``tie_s`` of the nearest, so a rack that fails at once keeps every node) keep the job's
    evidence at full weight (``candidates`` 1); the job's other nodes lose it.  A job with no
    such node keeps every node at ``confidence / candidates``.

    >>> ev = np.array([("a", 100.0, np.nan, "node_fail", 0.8, True, 2, "7", ""),
    ...                ("b", 100.0, np.nan, "node_fail", 0.8, True, 2, "7", ""),
    ...                ("b", 95.0, 900.0, "silence", 0.6, True, 1, "", "")], dtype=EVIDENCE_DTYPE)
    >>> resolve_node_fail(ev)[["node", "kind", "candidates"]].tolist()
    [('b', 'node_fail', 1), ('b', 'silence', 1)]
    """
    ev = np.asarray(evidence, dtype=EVIDENCE_DTYPE)
    nf = np.flatnonzero((ev["kind"] == "node_fail") & (ev["candidates"] > 1))
    if nf.size == 0:
        return ev
    stop = ev[(ev["kind"] != "node_fail") & ev["stop"]]
    order = np.lexsort((stop["start"], stop["node"]))
    s_node, s_start = stop["node"][order], stop["start"][order]
    # the stop evidence nearest in time to every NODE_FAIL row, on its node
    lo, hi = np.searchsorted(s_node, ev["node"][nf], "left"), np.searchsorted(s_node, ev["node"][nf], "right")
    nearest = np.full(nf.size, np.inf)
    for k in np.flatnonzero(hi > lo):
        nearest[k] = np.min(np.abs(s_start[lo[k]:hi[k]] - ev["start"][nf[k]]))
    keep = np.ones(ev.size, bool)
    key = np.char.add(np.char.add(ev["job_id"][nf], "@"), ev["start"][nf].astype(str))  # a requeued job ends again
    for job in np.unique(key):
        mine = key == job
        rows, dist = nf[mine], nearest[mine]
        if np.isfinite(dist).any() and dist.min() <= window_s:
            picked = dist <= dist.min() + tie_s
            keep[rows[~picked]] = False
            ev["candidates"][rows[picked]] = 1
    return ev[keep]


def merge_evidence(evidence: np.ndarray, params: Optional[LabelParams] = None) -> np.ndarray:
    """One label per failure from evidence (:data:`EVIDENCE_DTYPE`), every confidence kept
    (``min_confidence`` is applied by :func:`failure_labels`); sorted by time, then node."""
    p = params or LabelParams()
    ev = np.asarray(evidence, dtype=EVIDENCE_DTYPE)
    if ev.size == 0:
        return np.zeros(0, dtype=LABEL_DTYPE)
    ev = ev[np.lexsort((ev["start"], ev["node"]))]
    n = ev.size
    _, group = np.unique(ev["node"], return_inverse=True)
    # how long a piece keeps the failure open: the window, or until the node is back
    end = ev["end"]
    reach = np.where(np.isnan(end), ev["start"] + p.window_s, np.maximum(end, ev["start"] + p.window_s))
    # a new failure where a piece starts after everything before it on its node: a running
    # maximum per node, done over ranks offset by node so that nodes never mix
    _, ranks = np.unique(np.concatenate([ev["start"], reach]), return_inverse=True)
    span = int(ranks.max()) + 1
    start_key = group.astype(np.int64) * span + ranks[:n]
    reach_key = np.maximum.accumulate(group.astype(np.int64) * span + ranks[n:])
    new = np.ones(n, bool)
    new[1:] = start_key[1:] > reach_key[:-1]
    heads = np.flatnonzero(new)
    m = heads.size
    kind = ev["kind"]
    conf = ev["confidence"] / np.maximum(ev["candidates"], 1)   # a job's evidence shared by its nodes
    miss = np.ones(m)
    present = np.zeros((m, len(KINDS)), bool)
    for k, name in enumerate(KINDS):
        mine = kind == name
        best = np.maximum.reduceat(np.where(mine, conf, 0.0), heads)
        present[:, k] = np.maximum.reduceat(mine.astype(np.int8), heads).astype(bool)
        miss *= 1.0 - best
    stop_t = np.minimum.reduceat(np.where(ev["stop"], ev["start"], np.inf), heads)
    time = np.where(np.isfinite(stop_t), stop_t, np.minimum.reduceat(ev["start"], heads))
    out = np.zeros(m, dtype=LABEL_DTYPE)
    out["time"], out["node"], out["confidence"] = time, ev["node"][heads], 1.0 - miss
    out["source"] = ["+".join(name for k, name in enumerate(KINDS) if present[i, k]) for i in range(m)]
    bounds = np.append(heads, n)
    for i in range(m):
        piece = ev[bounds[i]:bounds[i + 1]]
        jobs = [j for j in dict.fromkeys(piece["job_id"].tolist()) if j]
        out["job_id"][i] = jobs[0] if jobs else ""
        said = [r for r, k in zip(piece["reason"].tolist(), piece["kind"].tolist()) if k == "event"]
        said = said or [r for r, k in zip(piece["reason"].tolist(), piece["kind"].tolist()) if k == "silence"]
        out["reason"][i] = "; ".join(dict.fromkeys(said))[:160] or ("NODE_FAIL " + ",".join(jobs))[:160]
    return out[np.lexsort((out["node"], out["time"]))]


def failure_labels(jobs: Iterable[Mapping[str, Any]] = (), events: Iterable[Mapping[str, Any]] = (),
                   samples: Optional[tuple[Sequence[str] | np.ndarray, Sequence[float] | np.ndarray]] = None,
                   end_time: Optional[float] = None, params: Optional[LabelParams] = None) -> np.ndarray:
    """Failures (:data:`LABEL_DTYPE`: ``time``, ``node``, ``job_id``, ``source``,
    ``confidence``, ``reason``) from Slurm jobs, Slurm node events and telemetry sample times.

    Parameters
    ----------
    jobs
        Job records with ``job_id``, ``state``, ``end_time`` (epoch s) and ``nodes``
        (``read_sacct``'s records); only ``NODE_FAIL`` jobs count.
    events
        Node events with ``node``, ``start``, ``end`` (``None``: open), ``state`` and
        ``reason`` (``read_events``' records, or node states a poller saw).
    samples
        ``(node names, times)`` of the telemetry, one entry per sample (or per grid step
        with a value): the silence evidence.  ``None``: no silence evidence.
    end_time
        End of the telemetry records (a node silent until then counts as silent);
        default: the last sample.
    params
        :class:`LabelParams`.

    Returns
    -------
    numpy.ndarray
        One row per failure with ``confidence >= params.min_confidence``, by time.
    """
    p = params or LabelParams()
    parts = [job_evidence(jobs), event_evidence(events)]
    if samples is not None:
        parts.append(silence_evidence(samples[0], samples[1], end_time, p))
    labels = merge_evidence(resolve_node_fail(np.concatenate(parts), p.window_s), p)
    return labels[labels["confidence"] >= p.min_confidence - 1e-12]


def match_labels(labels: np.ndarray, truth: np.ndarray, tolerance_s: float = 300.0) -> dict[str, Any]:
    """Recall and precision of ``labels`` against ``truth`` (both with ``time`` and ``node``):
    a true failure is found when a label names its node within ``tolerance_s``; a label is
    true when it names a true failure's node within ``tolerance_s``.

    >>> dt = [("time", "f8"), ("node", "U4")]
    >>> m = match_labels(np.array([(10.0, "a"), (5000.0, "a")], dt), np.array([(100.0, "a"), (100.0, "b")], dt))
    >>> m["found"], m["failures"], m["true_labels"], m["labels"], m["recall"], m["precision"]
    (1, 2, 1, 2, 0.5, 0.5)
    """
    lt, ln = np.asarray(labels["time"], float), np.asarray(labels["node"]).astype(str)
    tt, tn = np.asarray(truth["time"], float), np.asarray(truth["node"]).astype(str)

    def near(a_t: np.ndarray, a_n: np.ndarray, b_t: np.ndarray, b_n: np.ndarray) -> np.ndarray:
        """For each a, whether some b on its node lies within the tolerance (sorted search per node)."""
        hit = np.zeros(a_t.size, bool)
        if a_t.size == 0 or b_t.size == 0:
            return hit
        nodes, b_inv = np.unique(b_n, return_inverse=True)
        order = np.lexsort((b_t, b_inv))
        bt, bi = b_t[order], b_inv[order]
        a_idx = np.searchsorted(nodes, a_n)
        known = (a_idx < nodes.size) & (nodes[np.minimum(a_idx, nodes.size - 1)] == a_n)
        # search in the concatenated (node, time) order: key node index then time
        lo = np.searchsorted(bi, a_idx, side="left")
        hi = np.searchsorted(bi, a_idx, side="right")
        for i in np.flatnonzero(known):
            seg = bt[lo[i]:hi[i]]
            j = np.searchsorted(seg, a_t[i])
            cand = seg[max(j - 1, 0):j + 1]
            hit[i] = cand.size > 0 and bool(np.min(np.abs(cand - a_t[i])) <= tolerance_s)
        return hit

    found = near(tt, tn, lt, ln)
    true_labels = near(lt, ln, tt, tn)
    return {"failures": int(tt.size), "found": int(found.sum()), "labels": int(lt.size),
            "true_labels": int(true_labels.sum()),
            "recall": float(found.mean()) if tt.size else float("nan"),
            "precision": float(true_labels.mean()) if lt.size else float("nan"),
            "missed": [(str(n), float(t)) for n, t, f in zip(tn, tt, found) if not f],
            "false": [(str(n), float(t)) for n, t, f in zip(ln, lt, true_labels) if not f]}


def node_fail_labels(event: Mapping[str, Any]) -> list[dict]:
    """The stream's failure labels (``hpcguard.labels``) of one job event: a job that ended ``NODE_FAIL``
    names its nodes, each with ``NODE_FAIL_CONFIDENCE`` shared among them (sacct names the whole
    allocation, not the node that failed); any other event gives none.

    >>> [(x["node"], x["confidence"]) for x in node_fail_labels(
    ...     {"job_id": "41", "event": "end", "state": "NODE_FAIL", "time": 1000.0, "nodes": ["c1", "c2"]})]
    [('c1', 0.4), ('c2', 0.4)]
    """
    if event.get("event") != "end":
        return []
    ev = job_evidence([{**event, "end_time": event.get("end_time", event.get("time"))}])
    return [{"kind": "failure", "node": str(e["node"]), "time": float(e["start"]), "source": "node_fail",
             "job_id": str(e["job_id"]), "candidates": int(e["candidates"]),
             "confidence": round(float(e["confidence"]) / int(e["candidates"]), 6),
             "label_id": f"node_fail:{e['job_id']}:{e['node']}"} for e in ev]


def node_state_labels(event: Mapping[str, Any]) -> list[dict]:
    """The stream's failure labels (``hpcguard.labels``) of a node's Slurm state change (a ``node-state``
    job event: ``nodes``, ``time`` = the event's start, ``state``, ``reason``, ``end_time`` when the node
    is back), weighed by :func:`event_confidence`; a state that says nothing of a failure gives none.

    >>> [(x["node"], x["confidence"], x["stopped"]) for x in node_state_labels({"event": "node-state",
    ...     "time": 1000.0, "nodes": ["c1"], "state": "DOWN*", "reason": "Not responding"})]
    [('c1', 0.9, True)]
    >>> node_state_labels({"event": "node-state", "time": 1000.0, "nodes": ["c1"], "state": "DOWN",
    ...                    "reason": "kernel upgrade"})
    []
    """
    if event.get("event") != NODE_STATE:
        return []
    ev = event_evidence([{"node": n, "start": event.get("time"), "end": event.get("end_time"),
                          "state": event.get("state", ""), "reason": event.get("reason", "")}
                         for n in event.get("nodes") or ()])
    return [{"kind": "failure", "node": str(e["node"]), "time": float(e["start"]), "source": "event",
             "state": str(event.get("state", "")), "reason": str(event.get("reason", "")),
             "confidence": float(e["confidence"]), "stopped": bool(e["stop"]),
             "until": None if not math.isfinite(float(e["end"])) else float(e["end"]),
             "label_id": f"event:{e['node']}:{float(e['start']):.0f}"} for e in ev]


def merge_stream_labels(labels: Iterable[Mapping[str, Any]], params: Optional[LabelParams] = None) -> list[dict]:
    """Failures from the stream's failure labels (silences, ``NODE_FAIL`` jobs, Slurm node states; a label
    seen twice counts once), by the rules of :func:`failure_labels`: a job's evidence pinned to its nodes that went silent
    (:func:`resolve_node_fail`), one node's evidence merged (:func:`merge_evidence`), those under
    ``min_confidence`` dropped.

    >>> merge_stream_labels([{"kind": "failure", "node": "c1", "time": 975.0, "source": "silence"},
    ...     {"kind": "failure", "node": "c1", "time": 1000.0, "source": "node_fail", "job_id": "41", "candidates": 2},
    ...     {"kind": "failure", "node": "c2", "time": 1000.0, "source": "node_fail", "job_id": "41", "candidates": 2}])
    [{'node': 'c1', 'time': 975.0, 'family': 'node_fail+silence', 'confidence': 0.92}]
    """
    p = params or LabelParams()
    rows = {}
    for x in labels:
        if x.get("kind") != "failure":
            continue
        node, t, source = str(x["node"]), float(x["time"]), str(x.get("source", ""))
        if source == "silence":
            rows[(node, t, source)] = (node, t, np.nan, "silence", SILENCE_CONFIDENCE, True, 1, "", "silence")
        elif source == "node_fail":
            rows[(node, t, source)] = (node, t, np.nan, "node_fail", NODE_FAIL_CONFIDENCE, True,
                                       int(x.get("candidates", 1)), str(x.get("job_id", "")), "NODE_FAIL")
        elif source == "event":
            state, reason = str(x.get("state", "")), str(x.get("reason", ""))
            conf, stopped = event_confidence(state, reason)
            if conf > 0.0:  # a node down until its event ends (open: still down); a drain is a moment
                until = (np.inf if x.get("until") is None else max(float(x["until"]), t)) if stopped else np.nan
                rows[(node, t, source)] = (node, t, until, "event", conf, stopped, 1, "",
                                           f"{state}: {reason}".strip().rstrip(":"))
    merged = merge_evidence(resolve_node_fail(_evidence(list(rows.values())), p.window_s), p)
    return [{"node": str(f["node"]), "time": float(f["time"]), "family": str(f["source"]),
             "confidence": round(float(f["confidence"]), 6)}
            for f in merged if f["confidence"] >= p.min_confidence]
