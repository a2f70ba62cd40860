"""Node failures and an emulated failure predictor for the cluster simulator.

Failure sources
---------------
* LANL failure records (real failure times of one system mapped onto the simulated
  nodes, repair times from the records' start/fixed times), replayed cyclically when
  the simulated horizon is longer than the records.
* Per-node renewal processes: exponential or Weibull time to failure with a given node
  MTBF, exponential repair with mean MTTR (FARS §5.2.1, Tab. 3: node MTBF 14 d,
  MTTR 45 min).

Predictor (FARS §5.1, exactly): time is cut into FARS intervals of length ``I_F``;
at the start of interval ``k`` the predictor speaks about the window
``[k I_F + lead, (k+1) I_F + lead)`` (``lead`` = the minimum warning time; 0 in FARS).
Recall: a node that fails in a window is reported with probability ``recall``.
Precision: with ``x`` true reports, ``x (1 - precision) / precision`` node-windows
without a failure are drawn at random and reported as false alarms.

Example
-------
>>> import numpy as np
>>> f = renewal_failures(np.random.default_rng(0), nodes=64, horizon_s=30 * 86400, mtbf_h=14 * 24,
...                      mttr_h=0.75)
>>> p = emulate_predictor(np.random.default_rng(1), f, nodes=64, horizon_s=30 * 86400, interval_s=1800,
...                       precision=0.7, recall=0.7)
>>> 0.5 < p.measured_recall(f) < 0.9, 0.55 < p.measured_precision() < 0.85
(True, True)
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from hpcguard.models.units import parse_duration


@dataclass
class FailureTrace:
    """Node failures sorted by time: ``time`` (s), simulated ``node``, ``repair`` (s)."""

    time: np.ndarray
    node: np.ndarray
    repair: np.ndarray
    source: str = ""
    family: Optional[np.ndarray] = None   # failure family per failure ("" unknown); None: not known at all

    def __len__(self) -> int:
        return int(self.time.size)

    def system_mtbf_h(self, horizon_s: float) -> float:
        return float(horizon_s / max(len(self), 1) / 3600.0)


def _sorted(time, node, repair, source) -> FailureTrace:
    order = np.argsort(time, kind="stable")
    return FailureTrace(time=np.asarray(time, float)[order], node=np.asarray(node, np.int64)[order],
                        repair=np.asarray(repair, float)[order], source=source)


def renewal_failures(rng: np.random.Generator, nodes: int, horizon_s: float, mtbf_h: float, mttr_h: float = 0.75,
                     shape: float = 1.0) -> FailureTrace:
    """Independent per-node failure/repair cycles (vectorised).

    Time to failure after a repair is Weibull with ``shape`` (1 = exponential) and
    mean ``mtbf_h``; repair times are exponential with mean ``mttr_h``.
    """
    if nodes <= 0 or horizon_s <= 0 or mtbf_h <= 0 or shape <= 0 or mttr_h < 0:
        raise ValueError("nodes, horizon, mtbf and shape must be positive, mttr non-negative")
    mtbf_s, mttr_s = mtbf_h * 3600.0, mttr_h * 3600.0
    scale = mtbf_s / math.gamma(1.0 + 1.0 / shape)
    k = int(horizon_s / (mtbf_s + mttr_s) * 1.5 + 10 * math.sqrt(horizon_s / mtbf_s + 1) + 10)
    ttf = scale * rng.weibull(shape, size=(nodes, k))
    rep = rng.exponential(mttr_s, size=(nodes, k)) if mttr_s > 0 else np.zeros((nodes, k))
    # failure i of a node happens after i earlier failure+repair cycles plus its own time to failure
    fail_t = np.cumsum(ttf + rep, axis=1) - rep
    keep = fail_t < horizon_s
    node_idx = np.broadcast_to(np.arange(nodes)[:, None], fail_t.shape)
    kind = "exponential" if shape == 1.0 else f"weibull(shape={shape:g})"
    return _sorted(fail_t[keep], node_idx[keep], rep[keep], f"{kind}, node mtbf {mtbf_h:g} h, mttr {mttr_h:g} h")


def lanl_failures(path: str, system: int, nodes: int, horizon_s: float, offset_s: float = 0.0) -> FailureTrace:
    """Failures of LANL ``system`` mapped onto ``nodes`` simulated nodes.

    The system's nodes are ranked by node number; node ``r`` becomes simulated node ``r``
    (a system with more nodes contributes its first ``nodes`` nodes, so per-node failure
    rates are the system's own; a smaller system is replicated, each copy shifted by a
    fraction of the records' span).  Times are shifted so the system's first record
    (plus ``offset_s``) is time 0 and repeated with the records' span as period to
    cover ``horizon_s``.
    Repair time = problem fixed − problem started (negative or missing → the median).
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"LANL failure file not found: {path}")
    from hpcguard.connectors.lanl import load_lanl

    rec = load_lanl(path)
    mask = np.asarray(rec.system) == int(system)
    if not mask.any():
        raise ValueError(f"LANL system {system} has no records in {path}")
    start = np.asarray(rec.start_s, float)[mask]
    end = np.asarray(rec.end_s, float)[mask]
    node = np.asarray(rec.node)[mask]
    repair = end - start
    good = np.isfinite(repair) & (repair >= 0)
    med = float(np.median(repair[good])) if good.any() else 3600.0
    repair = np.where(good, repair, med)
    uniq, rank = np.unique(node, return_inverse=True)
    n_sys = int(uniq.size)
    t = start - start.min() - offset_s
    period = max(float(start.max() - start.min()), 86400.0)
    if n_sys >= nodes:
        # the first ``nodes`` nodes of the system keep their own failure histories
        sel = rank < nodes
        t, rank, repair = t[sel], rank[sel], repair[sel]
    else:
        # a larger simulated cluster: copies of the system, each shifted in time
        copies = int(math.ceil(nodes / n_sys))
        t = np.concatenate([(t + c * period / copies) % period for c in range(copies)])
        rank = np.concatenate([rank + c * n_sys for c in range(copies)])
        repair = np.tile(repair, copies)
        sel = rank < nodes
        t, rank, repair = t[sel], rank[sel], repair[sel]
    reps = int(math.ceil((horizon_s + offset_s) / period)) + 1
    times = np.concatenate([t + i * period for i in range(reps)])
    nodes_all = np.tile(rank, reps)
    repairs = np.tile(repair, reps)
    keep = (times >= 0) & (times < horizon_s)
    return _sorted(times[keep], nodes_all[keep], repairs[keep], f"LANL system {system} ({mask.sum()} records)")


def parse_failure_spec(spec: str, nodes: int, horizon_s: float, rng: np.random.Generator) -> FailureTrace:
    """Failures from a CLI spec.

    ``lanl:FILE:SYSTEM`` · ``weibull:shape=S,mtbf=D[,mttr=D]`` · ``exponential:mtbf=D[,mttr=D]``
    · ``none``.  ``mtbf`` is the per-node MTBF, ``mttr`` the mean repair time, both
    durations as the other commands take them (``24h``, ``90m``, ``14d``; a plain number
    is hours).  FARS Tab. 3 uses ``mtbf=14d`` (= 336).

    >>> f = parse_failure_spec("exponential:mtbf=90m,mttr=45m", 4, 86400.0, np.random.default_rng(0))
    >>> f.source, 25 < len(f) < 50          # 4 nodes × 24 h / (1.5 h up + 0.75 h repair) ≈ 43
    ('exponential, node mtbf 1.5 h, mttr 0.75 h', True)
    """
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    kind = kind.lower()
    if kind == "none":
        return FailureTrace(np.zeros(0), np.zeros(0, np.int64), np.zeros(0), "none")
    if kind == "lanl":
        path, _, system = rest.rpartition(":")
        if not path or not system.strip().isdigit():
            raise ValueError(f"bad failure spec {spec!r}: expected lanl:FILE:SYSTEM")
        return lanl_failures(path, int(system), nodes, horizon_s)
    if kind in ("weibull", "exponential"):
        params: dict[str, float] = {}
        for item in filter(None, rest.split(",")):
            key, eq, value = item.partition("=")
            key = key.strip().lower()
            if not eq:
                raise ValueError(f"bad failure spec {spec!r}: {item!r} is not key=value")
            try:  # shape is a number; mtbf and mttr are durations (bare number = hours)
                params[key] = float(value) if key == "shape" else parse_duration(value)
            except ValueError:
                raise ValueError(f"bad failure spec {spec!r}: {item!r} needs a "
                                 f"{'number' if key == 'shape' else 'duration such as 24h, 90m, 14d'}") from None
        unknown = set(params) - {"shape", "mtbf", "mttr"}
        if unknown or "mtbf" not in params:
            raise ValueError(f"bad failure spec {spec!r}: need mtbf=DURATION (and shape=S for weibull), "
                             f"unknown {sorted(unknown)}")
        if params["mtbf"] <= 0:
            raise ValueError(f"bad failure spec {spec!r}: mtbf must be positive")
        shape = params.get("shape", 1.0) if kind == "weibull" else 1.0
        return renewal_failures(rng, nodes, horizon_s, params["mtbf"], params.get("mttr", 0.75), shape)
    raise ValueError(f"bad failure spec {spec!r}: use lanl:FILE:SYSTEM, weibull:shape=S,mtbf=24h, "
                     "exponential:mtbf=90m or none")


@dataclass
class Predictions:
    """Emulated predictor output, sorted by issue time.

    ``issued`` (s): start of the FARS interval at which the warning is given; ``node``;
    ``window_start``/``window_end`` the predicted window; ``failure_index`` the index into
    the :class:`FailureTrace` of the predicted failure, or -1 for a false alarm.
    """

    issued: np.ndarray
    node: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    failure_index: np.ndarray
    n_failure_windows: int = 0
    lead_s: float = 0.0
    lead_each: Optional[np.ndarray] = None   # per-warning lead (s) when leads vary (``eval:`` predictor)

    def __len__(self) -> int:
        return int(self.issued.size)

    def measured_precision(self) -> float:
        return float((self.failure_index >= 0).mean()) if len(self) else float("nan")

    def measured_recall(self, failures: FailureTrace) -> float:
        return float((self.failure_index >= 0).sum() / max(self.n_failure_windows, 1))


def empty_predictions() -> Predictions:
    z = np.zeros(0)
    return Predictions(z, np.zeros(0, np.int64), z, z, np.zeros(0, np.int64), 0)


def emulate_predictor(rng: np.random.Generator, failures: FailureTrace, nodes: int, horizon_s: float,
                      interval_s: float, precision: float, recall: float, lead_s: float = 0.0) -> Predictions:
    """FARS §5.1 predictor emulation (see module docstring)."""
    if not (0 < precision <= 1 and 0 <= recall <= 1):
        raise ValueError("precision must be in (0, 1] and recall in [0, 1]")
    if interval_s <= 0 or lead_s < 0:
        raise ValueError("interval must be positive and lead non-negative")
    n_int = int(math.ceil(horizon_s / interval_s))
    k = np.floor((failures.time - lead_s) / interval_s).astype(np.int64)
    valid = k >= 0
    idx = np.flatnonzero(valid)
    cell = k[idx] * nodes + failures.node[idx]
    # one report per failing node-window (the window's first failure)
    ucell, first = np.unique(cell, return_index=True)
    n_fail_windows = int(ucell.size)
    hit = rng.random(n_fail_windows) < recall
    tp_cell, tp_fail = ucell[hit], idx[first[hit]]
    x = int(tp_cell.size)
    n_false = int(round(x * (1 - precision) / precision))
    total = n_int * nodes
    false_cells = np.zeros(0, np.int64)
    if n_false and total > n_fail_windows:
        need = min(n_false, total - n_fail_windows)
        picks: list[np.ndarray] = []
        got = 0
        while got < need:
            cand = np.unique(rng.integers(0, total, size=int((need - got) * 1.2) + 16))
            cand = cand[~np.isin(cand, ucell)]
            if picks:
                cand = cand[~np.isin(cand, np.concatenate(picks))]
            picks.append(cand[: need - got])
            got += picks[-1].size
        false_cells = np.concatenate(picks)
    cells = np.concatenate([tp_cell, false_cells])
    fidx = np.concatenate([tp_fail, np.full(false_cells.size, -1, np.int64)])
    kk = cells // nodes
    issued = kk * interval_s
    order = np.argsort(issued, kind="stable")
    issued, fidx, cells = issued[order], fidx[order], cells[order]
    ws = issued + lead_s
    return Predictions(issued=issued.astype(float), node=(cells % nodes).astype(np.int64), window_start=ws,
                       window_end=ws + interval_s, failure_index=fidx, n_failure_windows=n_fail_windows,
                       lead_s=float(lead_s))


def parse_predictor_spec(spec: Optional[str]) -> Optional[dict]:
    """``precision=P,recall=R,lead=5m`` → ``{"precision", "recall", "lead_s"}`` (None → None).

    ``eval:EVAL.json`` (a trained model's measured behaviour) → ``{"eval": path}``; the file
    is read by :func:`hpcguard.simulators.eval_predictor.load_eval_predictor`.
    """
    if not spec:
        return None
    if spec.strip().lower().startswith("eval:"):
        path = spec.strip()[5:].strip()
        if not path:
            raise ValueError(f"bad predictor spec {spec!r}: use eval:EVAL.json (from `evaluate failure --json`)")
        return {"eval": path}
    out = {"precision": 0.7, "recall": 0.7, "lead_s": 0.0}
    for item in filter(None, spec.split(",")):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or key not in ("precision", "recall", "lead"):
            raise ValueError(f"bad predictor spec {spec!r}: use precision=P,recall=R,lead=5m or eval:EVAL.json")
        if key == "lead":
            out["lead_s"] = parse_duration_s(value)
        else:
            try:
                out[key] = float(value)
            except ValueError:
                raise ValueError(f"bad predictor spec {spec!r}: {item!r}") from None
    return out


def parse_duration_s(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``2h``, ``1d`` → seconds."""
    t = text.strip().lower()
    mult = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    try:
        if t and t[-1] in mult:
            return float(t[:-1]) * mult[t[-1]]
        return float(t)
    except ValueError:
        raise ValueError(f"bad duration {text!r}: use e.g. 90s, 5m, 2h, 1d") from None
