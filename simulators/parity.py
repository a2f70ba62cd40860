"""The streaming pipeline against the offline computation on the same recorded files
(``hpcguard evaluate online``, and the demo's parity check).

The online side replays a recorded directory through a broker (embedded, or
``bootstrap``) and worker process(es) (:mod:`~hpcguard.simulators.pipeline_run`). The
offline side reads the same files (``connectors.recorded.load_sensor_grid``), cuts every
node's history into the predictor's windows at every 15 s step whose 4-minute window is
complete enough (the worker's rule), calls the same ``predictor.predict``, and decides with
the same policy, temporal job join and spare pool (``models.decision_trace.decide_trace``).
The two are compared per node and step (warnings) and by action id.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Optional

import numpy as np

from hpcguard.models.features import memory_in_use
from hpcguard.settings import Settings

MIN_PRESENT = 0.75   # share of a window's steps with a sample before the worker judges it (models.grid)


def load_job_events(data_dir: str) -> list[dict]:
    """``JobEvent``-shaped dicts of every sacct dump under ``DIR/slurm`` and the ``node-state`` events of
    its ``sacctmgr show event`` dumps, as the replay sends them (rejected rows skipped)."""
    from hpcguard.connectors.file_formats import slurm_dumps
    from hpcguard.connectors.sacct import decode_slurm_envelope, job_events, read_sacct
    from hpcguard.connectors.slurm_events import decode_event_envelope, event_envelope, read_events

    events = [decode_slurm_envelope(env) for f in slurm_dumps(data_dir) for rec in read_sacct(f)
              if isinstance(rec, dict) for env in job_events(rec)]
    return events + [decode_event_envelope(event_envelope(rec)) for f in slurm_dumps(data_dir, "sacctmgr-event")
                     for rec in read_events(f) if isinstance(rec, dict)]


def offline_predictions(values: np.ndarray, t0: float, grid_s: float, nodes: list[str], predictor: Any,
                        window_steps: int = 16, chunk: int = 4096) -> list[dict]:
    """``NodePrediction``-shaped dicts for every node and step the worker would judge.

    A step is judged when it holds a sample and at least ``MIN_PRESENT`` of the
    ``window_steps`` steps ending with it do; the predictor gets its ``history_steps``
    ending there (NaN before the recording starts), and ``sample_time`` is the step's end.
    """
    n_nodes, n_steps, n_sensors = values.shape
    h = int(predictor.history_steps)
    present = ~np.isnan(values).all(axis=2)
    csum = np.concatenate([np.zeros((n_nodes, 1)), np.cumsum(present, axis=1)], axis=1)
    last = np.arange(n_steps)
    count = csum[:, last + 1] - csum[:, np.maximum(last - window_steps + 1, 0)]
    # the worker judges a step when it closes, and only a step that received a sample closes
    node_idx, step_idx = np.nonzero(present & (count >= MIN_PRESENT * window_steps))
    padded = np.concatenate([np.full((n_nodes, h - 1, n_sensors), np.nan), values], axis=1)
    views = np.lib.stride_tricks.sliding_window_view(padded, h, axis=1)      # (nodes, steps, sensors, h)
    out = []
    for a in range(0, node_idx.size, chunk):
        ni, si = node_idx[a:a + chunk], step_idx[a:a + chunk]
        names = [nodes[i] for i in ni.tolist()]
        windows = views[ni, si].transpose(0, 2, 1)
        verdicts = predictor.predict(names, windows)
        for name, s, v, mem in zip(names, si.tolist(), verdicts, memory_in_use(windows)):
            out.append({"node": name, "sample_time": t0 + (s + 1) * grid_s, "warn": bool(v.warn),
                        "lead_minutes": float(v.lead_minutes), "failure_probability": float(v.failure_probability),
                        "model": predictor.name, "mem_usage_percent": mem})
            if v.score is not None:
                out[-1]["score"] = None if v.score != v.score else float(v.score)
    return out


def judge_with_budget(predictions: list[dict], partitions: int, make_budget: Any) -> list[dict]:
    """The worker's false-alarm budget over offline predictions, in place: one
    :class:`~hpcguard.models.budget_epochs.EpochBudget` per input partition (a node's, by Kafka's
    default partitioner on its name, as the replay keys samples), each judging its nodes' scores in
    time then node order; ``warn`` and ``threshold`` set as the worker sets them.  Returns the labels
    the budgets recognised (``hpcguard.labels``: failures, resolved warning episodes) with their ids."""
    from hpcguard.connectors.kafka import key_partition
    from hpcguard.models.budget_epochs import judge

    budgets: dict[int, Any] = {}
    for p in sorted(predictions, key=lambda p: (p["sample_time"], p["node"])):
        part = key_partition(p["node"], partitions)
        budget = budgets.get(part) or budgets.setdefault(part, make_budget())
        p["warn"], p["threshold"] = judge(budget, p["node"], p["sample_time"], p.get("score"))
    return [label for part in sorted(budgets) for label in budgets[part].take_labels()]


def offline_decisions(data_dir: str, model_dir: str, settings: Settings,
                      predictions: Optional[list[dict]] = None) -> dict[str, list[dict]]:
    """Predictions and actions the worker must produce for ``data_dir`` (see the module docstring);
    ``predictions`` of an earlier call on the same files and model skip the scan (another policy)."""
    from hpcguard.connectors.recorded import load_sensor_grid
    from hpcguard.models.decision_trace import decide_trace
    from hpcguard.models.labels import node_fail_labels, node_state_labels
    from hpcguard.streams.decisions import budget_for, hot_spares, policy_for
    from hpcguard.streams.predictors import load_predictor

    predictor = load_predictor(model_dir)
    if predictor is None:
        raise ValueError("a model directory is required")
    w = settings.worker
    make_budget = budget_for(settings, predictor)
    grid = load_sensor_grid(data_dir, grid_s=w.grid_s, settings=settings)
    if predictions is None:
        predictions = offline_predictions(grid.values, grid.t0, grid.grid_s, list(grid.nodes), predictor,
                                          int(round(w.window_minutes * 60 / w.grid_s)))
    # the budget judges votes it has scores for (offline_predictions after budget_for): not a caller's fixed verdicts
    scored = make_budget is not None and any("score" in p for p in predictions)
    labels = judge_with_budget(predictions, settings.topics.partitions, make_budget) if scored else []
    preds = predictions
    jobs = load_job_events(data_dir)
    labels += [label for event in jobs for label in node_fail_labels(event) + node_state_labels(event)]  # Slurm's word
    actions = decide_trace(preds, jobs, grid.nodes, policy_for(settings), predictor,
                           quiet_s=60.0 * settings.policy.quiet_minutes, hot_spares=hot_spares(settings))
    return {"predictions": preds, "actions": actions, "labels": labels}


def compare(offline: dict[str, list[dict]], online: dict[str, list[dict]], limit: int = 50) -> dict[str, Any]:
    """Per (node, step) verdicts and action ids of the two sides; ``counts`` and the first
    ``limit`` differences of each kind. Offline steps after a node's last streamed verdict
    (and their actions) are ``pending_at_end``: the stream's watermark never passed them.

    >>> off = {"predictions": [{"node": "a", "sample_time": 15.0, "warn": True, "model": "m"}],
    ...        "actions": [{"action_id": "x", "reason": {"predicted_node": "a", "sample_time": 15.0}}]}
    >>> on = {"predictions": [{"node": "a", "sample_time": 15.0, "warn": False, "model": "m"}], "actions": []}
    >>> compare(off, on)["counts"]["warn_differs"], compare(off, on)["counts"]["actions_only_offline"]
    (1, 1)
    """
    def key(p):
        return (str(p["node"]), int(round(float(p["sample_time"]))))

    off_p = {key(p): bool(p["warn"]) for p in offline["predictions"]}
    on_p = {key(p): bool(p["warn"]) for p in online["predictions"]}
    # steps after a node's last streamed verdict are still open at the end of the stream (no later
    # record moved the watermark past them): pending, not different
    last_on: dict[str, int] = {}
    for n, t in on_p:
        last_on[n] = max(last_on.get(n, t), t)

    def pending(n: str, t: float) -> bool:
        return t > last_on.get(n, float("-inf"))

    # the false-alarm budget's threshold each verdict met (worker.false_alarms), where both sides have one
    off_t = {key(p): p["threshold"] for p in offline["predictions"] if p.get("threshold") is not None}
    on_t = {key(p): (p.get("detail") or {}).get("budget", {}).get("threshold") for p in online["predictions"]}
    threshold_differs = sorted(k for k in set(off_t) & set(on_t) if off_t[k] != on_t[k])  # None: not budgeted
    pend = sorted(k for k in set(off_p) - set(on_p) if pending(*k))
    only_off = sorted(set(off_p) - set(on_p) - set(pend))
    only_on = sorted(set(on_p) - set(off_p))
    differs = sorted(k for k in set(off_p) & set(on_p) if off_p[k] != on_p[k])
    # decisions on node warnings (CanarIO's IO actions are not part of this parity)
    off_a = {a["action_id"]: a for a in offline["actions"]
             if not pending(str(a["reason"]["predicted_node"]), round(float(a["reason"]["sample_time"])))}
    on_a = {a["action_id"]: a for a in online["actions"] if "predicted_node" in (a.get("reason") or {})}

    def brief(a):
        return {k: a.get(k) for k in ("action_id", "kind", "job_id", "nodes", "source")} | \
            {"sample_time": (a.get("reason") or {}).get("sample_time")}

    counts = {"offline_predictions": len(off_p), "online_predictions": len(on_p),
              "offline_warnings": sum(off_p.values()), "online_warnings": sum(on_p.values()),
              "predictions_only_offline": len(only_off), "predictions_only_online": len(only_on),
              "pending_at_end": len(pend),
              "warn_differs": len(differs), "threshold_differs": len(threshold_differs),
              "budgeted_predictions": len(off_t),
              "offline_actions": len(off_a), "online_actions": len(on_a),
              "actions_only_offline": len(set(off_a) - set(on_a)), "actions_only_online": len(set(on_a) - set(off_a))}
    # labels (hpcguard.labels) by id and what they say; a label whose horizon the stream never passed is not out yet
    def label_key(x):
        return (x["label_id"], x.get("outcome"), x.get("end"), x.get("failure_time"))

    off_l = {label_key(x) for x in offline.get("labels", [])}
    on_l = {label_key(x) for x in online.get("labels", [])}
    counts.update(offline_labels=len(off_l), online_labels=len(on_l), labels_only_online=len(on_l - off_l),
                  labels_only_offline=len(off_l - on_l))
    counts["identical"] = not (differs or threshold_differs or on_l - off_l or set(off_a) ^ set(on_a)) and not (
        [k for k in only_off if off_p[k]] or [k for k in only_on if on_p[k]])
    return {"counts": counts,
            "warn_differs": [{"node": n, "sample_time": t, "offline": off_p[(n, t)], "online": on_p[(n, t)]}
                             for n, t in differs[:limit]],
            "threshold_differs": [{"node": n, "sample_time": t, "offline": off_t[(n, t)], "online": on_t[(n, t)]}
                                  for n, t in threshold_differs[:limit]],
            "predictions_only_offline": [{"node": n, "sample_time": t, "warn": off_p[(n, t)]}
                                         for n, t in only_off[:limit]],
            "predictions_only_online": [{"node": n, "sample_time": t, "warn": on_p[(n, t)]}
                                        for n, t in only_on[:limit]],
            "actions_only_offline": [brief(off_a[i]) for i in sorted(set(off_a) - set(on_a))[:limit]],
            "actions_only_online": [brief(on_a[i]) for i in sorted(set(on_a) - set(off_a))[:limit]],
            "labels_only_online": sorted(on_l - off_l, key=str)[:limit],
            "labels_only_offline": sorted(off_l - on_l, key=str)[:limit]}


def evaluate_online_run(data: str, model: str, workers: int = 1, speed: Optional[float] = None,
                        bootstrap: Optional[str] = None, config: Optional[str] = None,
                        workdir: Optional[str] = None, timeout_s: float = 600.0, quiet: bool = True,
                        worker_env: Optional[dict] = None, groups: Optional[list[list[str]]] = None) -> dict[str, Any]:
    """Replay ``data`` through the pipeline, compute the offline side, compare (``groups``:
    replay these parts of ``data`` one after another, see :func:`~hpcguard.simulators.pipeline_run.run_pipeline`)."""
    import tempfile

    from hpcguard.connectors.broker import EmbeddedBroker
    from hpcguard.connectors.kafka import wait_for_broker
    from hpcguard.simulators.pipeline_run import read_topic, run_pipeline

    if workers < 1:
        raise ValueError("--workers must be >= 1")
    work = Path(workdir or tempfile.mkdtemp(prefix="hpcguard-online-"))
    work.mkdir(parents=True, exist_ok=True)
    broker = None
    try:
        if not bootstrap:
            broker = EmbeddedBroker(log_path=str(work / "broker.log")).start()
            bootstrap = broker.bootstrap
        run_id = uuid.uuid4().hex[:8]
        base = Settings.load(config)
        # a fresh topic set per run, so an external broker's older records are not read back
        prefix = f"{base.topics.prefix}-online-{run_id}"
        settings = base.with_overrides(
            kafka=dict(bootstrap=bootstrap),
            topics=dict(prefix=prefix, ldms_format=f"{prefix}.ldms.{{schema}}",
                        partitions=max(base.topics.partitions, workers)),
            worker=dict(app_id=f"hpcguard-online-{run_id}", data_dir=str(work / "worker")),
            adapter=dict(kind="dry-run", audit_log=str(work / "actions-audit.jsonl"),
                         ledger=str(work / "ledger.sqlite")))
        wait_for_broker(settings.kafka)
        env = {"HPCGUARD_TOPICS__PREFIX": prefix, "HPCGUARD_TOPICS__LDMS_FORMAT": f"{prefix}.ldms.{{schema}}",
               **({"HPCGUARD_CONFIG": config} if config else {}), **(worker_env or {})}
        run = run_pipeline(settings, Path(data), model, work, workers, speed, env, quiet, timeout_s,
                           groups=groups)
        topics = run["topics"]
        online = {"predictions": [p for p, _ in read_topic(settings.kafka, topics.predictions)],
                  "actions": [a for a, _ in read_topic(settings.kafka, topics.actions)],
                  "labels": [x for x, _ in read_topic(settings.kafka, topics.labels)]}
    finally:
        if broker is not None:
            broker.stop()
    offline = offline_decisions(data, model, settings)
    report = compare(offline, online)
    report["run"] = {"data": data, "model": model, "workers": workers, "speed": speed, "workdir": str(work),
                     "prefix": settings.topics.prefix,
                     "replayed": run["replayed"], "elapsed_s": round(run["elapsed"], 1)}
    return report

