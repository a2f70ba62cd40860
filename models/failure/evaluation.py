"""Table-4.1-style evaluation of failure predictors (seed 000 §4.3).

``report_row`` turns one predictor's decisions on labelled events into the columns
of Tab. 4.1 (tpr, ppv, fpr, UC(1024)) plus the node counts where UC crosses 5 %,
30 % and 50 % (Fig. 4.12).  ``ensemble_rows`` produces the ensemble's rows:
unanimous voting over 1, 2, 4 and 6 networks, the LSTM vote and a single network.
``online_scan`` runs the ensemble the way the node agent does — every node, every
15 s step, all networks on the latest window — and returns its warnings.

Example
-------
>>> import numpy as np
>>> row = report_row("x", np.array([1, 1, 0, 0, 0]), np.array([1, 0, 0, 0, 1]))
>>> (row["tpr"], row["fpr"], row["nodes_uc_50"])
(0.5, 0.3333333333333333, 2)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hpcguard.models.failure.dataset import WINDOW_STEPS, stream_windows
from hpcguard.models.features import window_features
from hpcguard.models.metrics import rates, uc_crossing, uc_probability

UC_LEVELS: tuple[float, ...] = (0.05, 0.30, 0.50)


def report_row(name: str, y_true: np.ndarray, y_pred: np.ndarray, p_ok: float = 1.0) -> dict[str, Any]:
    """tpr, ppv, fpr, UC(1024), counts and UC crossing node counts of one predictor."""
    r = rates(y_true, y_pred)
    y, p = np.asarray(y_true).astype(bool), np.asarray(y_pred).astype(bool)
    fpr = r["fpr"]
    row: dict[str, Any] = {"name": name, "tpr": r["tpr"], "ppv": r["ppv"], "fpr": fpr,
                           "uc_1024": float(uc_probability(fpr, 1024, p_ok)) if fpr == fpr else float("nan"),
                           "tp": int((y & p).sum()), "fp": int((~y & p).sum()),
                           "failures": int(y.sum()), "ok": int((~y).sum())}
    for level in UC_LEVELS:
        row[f"nodes_uc_{int(round(level * 100))}"] = uc_crossing(fpr, level, p_ok) if fpr == fpr else None
    return row


def ensemble_rows(ensemble, features: np.ndarray, labels: np.ndarray, p_ok: float = 1.0,
                  unanimous: tuple[int, ...] = (1, 2, 4, 6), single_lead: int = 2) -> tuple[list[dict], dict]:
    """Rows for unanimous@n, the LSTM vote and one network on per-lead event features ``(N, 6, 70)``.

    Also returns the raw scores (``network_probabilities``, ``vote_probability``) for ROC plots.
    """
    out = ensemble.predict_batch(features)
    rows = [report_row(f"unanimous@{n}", labels, ensemble.unanimous(out.network_probabilities, n), p_ok)
            for n in unanimous]
    rows.append(report_row("lstm-vote", labels, out.vote_probability >= ensemble.threshold, p_ok))
    i = list(ensemble.leads).index(single_lead)
    rows.append(report_row(f"single-network@{single_lead}min", labels,
                           out.network_probabilities[:, i] > ensemble.net_threshold, p_ok))
    return rows, {"network_probabilities": out.network_probabilities, "vote_probability": out.vote_probability}


def online_scan(ensemble, values: np.ndarray, t0: float, grid_s: float,
                window_steps: int = WINDOW_STEPS) -> dict[str, np.ndarray]:
    """Warnings of the ensemble evaluated at every step of every node (online use).

    Returns ``node`` and ``time`` (end of the window) of each warning, and the warning
    flag for every (node, step) as ``warn (nodes, windows)`` with ``window_end_time``.
    Windows with no sample at all are not evaluated (node down).
    """
    v = np.asarray(values, dtype=float)
    n_nodes = v.shape[0]
    views = stream_windows(v, window_steps)                       # (nodes, W, T, S)
    n_win = views.shape[1]
    warn = np.zeros((n_nodes, n_win), bool)
    for n in range(n_nodes):                                      # one batch per node keeps memory bounded
        alive = ~np.isnan(views[n]).all(axis=(1, 2))
        if not alive.any():
            continue
        feats = window_features(views[n][alive])
        warn[n, np.flatnonzero(alive)] = ensemble.predict_batch(feats).warn
    end_time = t0 + (np.arange(n_win) + window_steps) * grid_s
    nodes, idx = np.nonzero(warn)
    return {"warn": warn, "window_end_time": end_time, "node": nodes, "time": end_time[idx]}


def online_summary(scan: dict[str, np.ndarray], failure_nodes: np.ndarray, failure_times: np.ndarray,
                   healthy: np.ndarray, horizon_s: float = 900.0, min_lead_s: float = 120.0) -> dict[str, Any]:
    """Per-step fpr on healthy steps, failures warned within ``horizon_s`` and their lead times.

    ``healthy (nodes, steps)`` marks healthy steps (``dataset.healthy_mask``); a window
    counts as healthy when the step it ends on is healthy.
    """
    warn, end_time = scan["warn"], scan["window_end_time"]
    n_win = warn.shape[1]
    steps_total = healthy.shape[1]
    h = healthy[:, steps_total - n_win:]
    fp_steps = int((warn & h).sum())
    leads = []
    for node, t in zip(np.asarray(failure_nodes, int), np.asarray(failure_times, float)):
        hit = warn[node] & (end_time >= t - horizon_s) & (end_time <= t)
        if hit.any():
            leads.append(float(t - end_time[np.flatnonzero(hit)[0]]))
    leads_arr = np.asarray(leads)
    n_fail = int(len(failure_times))
    return {"healthy_steps": int(h.sum()), "false_positive_steps": fp_steps,
            "fpr_per_step": fp_steps / max(int(h.sum()), 1), "failures": n_fail, "warned": int(leads_arr.size),
            "recall": leads_arr.size / n_fail if n_fail else float("nan"),
            "warned_at_least_2min": float((leads_arr >= min_lead_s).mean()) if leads_arr.size else float("nan"),
            "median_lead_minutes": float(np.median(leads_arr) / 60) if leads_arr.size else float("nan")}
