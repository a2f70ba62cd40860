"""CanarIO evaluation on a recorded run: detector, job classifier, node-hours (seed 004 §4.4–4.6).

Works on any object with the fields of :class:`hpcguard.simulators.pfs.PfsTrace`
(``start``, ``slowdown``, ``io_read``, ``io_write``, ``episodes``, ``probes``, ``jobs``,
``scripts``).  Pure computation; the CLI reads the files and draws the plots.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from hpcguard.models.canario.accounting import SlowdownWaste, cumulative_probe_cost, replacement_node_hours
from hpcguard.models.canario.decisions import io_aware_actions
from hpcguard.models.canario.detector import (WINDOW_S, binary_rates, episode_detection, io_window_features_batch,
                                             replay_detector, window_probe_labels)
from hpcguard.models.canario.labelling import label_jobs, unique_job_keys
from hpcguard.models.canario.prionn import JobSensitivityClassifier
from hpcguard.models.canario.probes import DEFAULT_THRESHOLD, probe_node_hours, probe_ratios

KNN_THRESHOLDS = (0, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)  # percent, Figs. 4.12–4.13
TREE_THRESHOLDS = (0, 5, 25, 50, 100)


def detector_windows(trace) -> dict[str, np.ndarray]:
    """Window features, ends, probe-ratio labels and label times of a trace."""
    probes = trace.probes
    _expected, ratio = probe_ratios(probes["probe_type"], probes["runtime_s"], probes["end"])
    x = io_window_features_batch(trace.io_read, trace.io_write, int(WINDOW_S))
    window_start = trace.start + WINDOW_S * np.arange(len(x))
    label, label_time = window_probe_labels(window_start, probes["start"], probes["end"], ratio)
    return {"x": x, "window_end": window_start + WINDOW_S, "ratio": label, "label_time": label_time,
            "probe_ratio": ratio}


def evaluate_detector(win: dict, models: Sequence[str] = ("knn", "rf", "dt"),
                      knn_thresholds: Sequence[float] = KNN_THRESHOLDS,
                      tree_thresholds: Sequence[float] = TREE_THRESHOLDS, k: int = 5,
                      initial_bank_s: float = 86400.0, retrain_every_s: float = 600.0,
                      progress: Optional[Callable[[str], None]] = None) -> tuple[list[dict], dict]:
    """Rows ``model, threshold (%), f1, precision, recall, tpr, tnr, ...`` and per-model predictions."""
    rows, preds = [], {}
    for model in models:
        pcts = knn_thresholds if model == "knn" else tree_thresholds
        ths = [1 + p / 100.0 for p in pcts]
        predicted, probs = replay_detector(win["x"], win["window_end"], win["ratio"], win["label_time"], model,
                                           ths, k=k, initial_bank_s=initial_bank_s, retrain_every_s=retrain_every_s)
        scored = predicted & np.isfinite(win["ratio"])
        for p, t in zip(pcts, ths):
            r = binary_rates(win["ratio"][scored] > t, probs[t][scored] > 0.5)
            rows.append({"model": model, "threshold": float(p), **r})
        preds[model] = {"predicted": predicted, "probs": probs}
        if progress:
            progress(model)
    return rows, preds


def evaluate_jobs(trace, probe_ratio: np.ndarray, retrain_every: int = 100, train_size: int = 500,
                  min_unique: int = 100, min_per_class: int = 25, seed: int = 0,
                  progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """Replay submissions: label completed jobs (§4.3), retrain the CNN every 100 completions, predict at submit.

    As in §4.4 the first training waits until ``min_unique`` unique labelled jobs exist
    (and ``min_per_class`` labelled runs of each class); jobs submitted before it get
    no prediction and are not scored.
    """
    jobs = trace.jobs
    scripts = [trace.scripts[j] for j in jobs["job_id"]]
    key = unique_job_keys(scripts, jobs["user"], jobs["name"], jobs["num_nodes"])
    total_io = jobs["total_read_bytes"] + jobs["total_write_bytes"]
    probes = trace.probes
    probe_bad = probe_ratio > DEFAULT_THRESHOLD
    n = len(scripts)
    end_sorted = np.sort(jobs["end"])
    checkpoints = end_sorted[retrain_every - 1::retrain_every]
    clf = JobSensitivityClassifier(train_size=train_size, retrain_every=retrain_every, seed=seed)
    prob = np.full(n, np.nan)
    bounds = np.r_[checkpoints, np.inf]
    for i, t_k in enumerate(checkpoints):
        done = jobs["end"] <= t_k
        pdone = probes["end"] <= t_k
        lab = label_jobs(key[done], jobs["start"][done], jobs["end"][done], jobs["num_nodes"][done], total_io[done],
                         probes["start"][pdone], probes["end"][pdone], probe_bad[pdone])
        keep = lab.label >= 0
        idx, labels = np.flatnonzero(done)[keep], lab.label[keep]
        newest = np.argsort(jobs["end"][idx], kind="stable")[-train_size:]
        idx, labels = idx[newest], labels[newest]
        enough = clf.trained or np.unique(key[np.flatnonzero(done)[keep]]).size >= min_unique
        if enough and min(labels.sum(), labels.size - labels.sum()) >= min_per_class:
            clf.learn_many([scripts[j] for j in idx], labels)
        if clf.trained:
            upcoming = np.flatnonzero((jobs["submit"] > t_k) & (jobs["submit"] <= bounds[i + 1]))
            if upcoming.size:
                prob[upcoming] = clf.predict_many([scripts[j] for j in upcoming])
        if progress:
            progress(i + 1, len(checkpoints))
    final = label_jobs(key, jobs["start"], jobs["end"], jobs["num_nodes"], total_io, probes["start"], probes["end"],
                       probe_bad)
    has = np.isfinite(prob)
    truth = jobs["io_sensitive"].astype(bool)
    pred = prob > 0.5
    vs_truth = binary_rates(truth[has], pred[has])
    lab_mask = has & (final.label >= 0)
    vs_labels = binary_rates(final.label[lab_mask] == 1, pred[lab_mask])
    acc = lambda r: (r["tp"] + r["tn"]) / r["n"] if r["n"] else float("nan")  # noqa: E731
    return {"tpr": vs_truth["tpr"], "tnr": vs_truth["tnr"], "accuracy": acc(vs_truth), "predicted_jobs": int(has.sum()),
            "tpr_vs_labels": vs_labels["tpr"], "tnr_vs_labels": vs_labels["tnr"], "accuracy_vs_labels": acc(vs_labels),
            "labelled_jobs": int(lab_mask.sum()), "trainings": clf.n_trainings, "funnel": final.funnel,
            "probability": prob, "expected_s": final.expected_s}


def evaluate_node_hours(trace, window_end: np.ndarray, degraded: np.ndarray, sensitivity: np.ndarray,
                        expected_s: np.ndarray) -> dict:
    """§4.6 replay: on every detected-degraded window apply Fig. 5.1b and account the node-hours."""
    jobs = trace.jobs
    sens = np.nan_to_num(sensitivity, nan=0.0)
    expected = np.where(np.isfinite(expected_s), expected_s, jobs["base_runtime_s"])
    replaced = np.zeros(jobs["job_id"].size, bool)
    started_as_repl = np.zeros(jobs["job_id"].size, bool)
    events = []  # (t, job index, replacement index)
    index = {jid: i for i, jid in enumerate(jobs["job_id"])}
    delayed: set[str] = set()
    for t in window_end[degraded]:
        queued = np.flatnonzero((jobs["submit"] <= t) & (jobs["start"] > t) & ~started_as_repl)
        queued = queued[np.argsort(jobs["submit"][queued])]
        running = np.flatnonzero((jobs["start"] <= t) & (jobs["end"] > t) & ~replaced & ~started_as_repl)
        state = {"degraded": True, "window_end": float(t)}
        acts = io_aware_actions(
            state, [{"job_id": jobs["job_id"][i], "num_nodes": int(jobs["num_nodes"][i]), "sensitivity": sens[i]}
                    for i in queued],
            [{"job_id": jobs["job_id"][i], "num_nodes": int(jobs["num_nodes"][i]), "start": jobs["start"][i],
              "expected_runtime_s": expected[i], "sensitivity": sens[i]} for i in running], now=float(t),
            delayed=delayed)
        for a in acts:
            if a["kind"] == "delay":
                delayed.add(a["job_id"])
            elif a["kind"] == "reschedule":
                j, r = index[a["job_id"]], index[a["reason"]["replacement_job_id"]]
                replaced[j] = True
                started_as_repl[r] = True
                events.append((t, j, r))
    waste = SlowdownWaste(trace.slowdown)
    t0 = trace.start
    probe_cost = probe_node_hours(trace.probes["runtime_s"])
    if not events:
        return {"recovered": 0.0, "gain": 0.0, "false_positive_cost": 0.0, "false_negative_cost": 0.0,
                "replacements": 0, "delays": len(delayed), "probe_cost": probe_cost, "series": None}
    t, j, r = (np.array(v) for v in zip(*events))
    acc = replacement_node_hours(waste, t - t0, jobs["start"][j] - t0, jobs["end"][j] - t0, jobs["io_fraction"][j],
                                 jobs["num_nodes"][j], jobs["io_sensitive"][j], jobs["runtime_s"][r],
                                 jobs["io_fraction"][r], jobs["num_nodes"][r], jobs["io_sensitive"][r])
    grid = trace.start + 3600.0 * np.arange(int(np.ceil(trace.slowdown.size / 3600)) + 1)
    cum_rec = np.array([acc["recovered"][t <= g].sum() for g in grid])
    cum_probe = cumulative_probe_cost(grid, trace.probes["end"], trace.probes["runtime_s"])
    return {"recovered": float(acc["recovered"].sum()), "gain": float(acc["gain"].sum()),
            "false_positive_cost": float(acc["false_positive"].sum()),
            "false_negative_cost": float(acc["false_negative"].sum()), "replacements": len(events),
            "correct_replacements": int(jobs["io_sensitive"][j].sum()), "delays": len(delayed),
            "probe_cost": probe_cost, "series": {"time": grid, "recovered": cum_rec, "probe_cost": cum_probe}}


def evaluate_canario(trace, models: Sequence[str] = ("knn", "rf", "dt"), knn_thresholds=KNN_THRESHOLDS,
                     tree_thresholds=TREE_THRESHOLDS, initial_bank_s: float = 86400.0,
                     retrain_every_s: float = 600.0, seed: int = 0, progress=None) -> dict:
    """Full evaluation: ``detector`` rows, ``episodes``, ``jobs`` and ``node_hours`` (plus plot series)."""
    win = detector_windows(trace)
    rows, preds = evaluate_detector(win, models, knn_thresholds, tree_thresholds, initial_bank_s=initial_bank_s,
                                    retrain_every_s=retrain_every_s, progress=progress)
    main = "knn" if "knn" in preds else models[0]
    t5 = 1 + 5 / 100.0
    predicted = preds[main]["predicted"]
    degraded = predicted & (np.nan_to_num(preds[main]["probs"].get(t5, np.zeros(predicted.size)), nan=0) > 0.5)
    episodes = episode_detection(win["window_end"][predicted], degraded[predicted], trace.episodes)
    jobs = evaluate_jobs(trace, win["probe_ratio"], seed=seed)
    nh = evaluate_node_hours(trace, win["window_end"], degraded, jobs.pop("probability"), jobs.pop("expected_s"))
    series = nh.pop("series")
    severe = [e for e in episodes if e["severity"] == "severe" and e["windows"] > 0]
    return {"detector": rows,
            "episodes": {"detected": sum(e["detected"] for e in episodes),
                         "evaluated": sum(e["windows"] > 0 for e in episodes),
                         "severe_detected": sum(e["detected"] for e in severe), "severe_evaluated": len(severe),
                         "list": episodes},
            "jobs": {k: v for k, v in jobs.items()}, "node_hours": nh,
            "_plot": {"window_end": win["window_end"], "ratio": win["ratio"], "degraded": degraded,
                      "slowdown_minute": trace.slowdown[: len(win["window_end"]) * 60].reshape(-1, 60).mean(1),
                      "series": series}}
