"""``hpcguard demo`` as a function (:func:`run_demo`): embedded broker, simulated cluster
(with a PFS slowdown scenario for CanarIO), the detector trained on a separately seeded
history (or taken from the cache), the pipeline run (:mod:`~hpcguard.simulators.pipeline_run`),
the offline decisions on the same files (:mod:`~hpcguard.simulators.parity`) and a summary
of what was caught.  The same seed gives the same failures and action ids at any speed and
number of workers.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hpcguard.connectors.model_store import cache_root, code_digest
from hpcguard.settings import KafkaSettings, Settings
from hpcguard.simulators.pipeline_run import read_topic, run_pipeline
from hpcguard.streams.topics import TopicNames


@dataclass
class DemoConfig:
    """What ``hpcguard demo`` runs: the simulated cluster, the detector, the broker and the workers."""

    nodes: int = 32
    hours: float = 2.0
    seed: int = 53  # chosen: every kind of action shows, net > 0 (benchmarks/demo_seeds.py, docs/results.md)
    bootstrap: str | None = None
    model: str | None = None
    workdir: str | None = None
    influx: str | None = None
    influx_version: int = 2
    metrics_port: int | None = None
    timeout_s: float = 600.0
    train_hours: float | None = None
    detector: str = "ensemble"  # ensemble (seed 000's system) | baseline, trained on a separate history
    speed: float | None = None  # replay pace (× real time); None = as fast as possible
    workers: int = 1            # worker processes sharing the topics' partitions
    cache_dir: str | None = None  # trained demo models, keyed by their parameters
    worker_env: dict | None = None  # extra HPCGUARD_WORKER__* settings for the workers
    offline: bool = True        # also compute the offline decisions on the same files (parity)
    preload: bool = False       # replay everything before the workers start: they drain a backlog (benchmarks)
    sensor_map: str | None = None  # site sensor mapping for training, the workers and the offline scan
    quiet: bool = False
    # the evaluation cluster's workload (simulate_telemetry's TelemetryParams): long jobs that failures hit while
    # running, and room left for a spare node, so every action of the policy has a job to protect
    workload: dict | None = None
    restart_workers: bool = False  # a worker that exits is started again, as a supervisor would (benchmarks' kills)


#: the demo's workload: a busy cluster (jobs submitted at its full capacity, so at times a queue waits behind the
#: running jobs: CanarIO's delays and replacements need one), jobs of an hour or more (median 1 h, a long tail),
#: a node MTBF of 20 h (a failure every ~40 min on 32 nodes: most hit a running job), and one hot spare (the last
#: node, held out of the batch scheduler) that a warned job can migrate to
DEMO_WORKLOAD = {"runtime_median_minutes": 60.0, "runtime_sigma": 1.0, "utilization": 1.0, "warmup_hours": 16.0,
                 "mtbf_hours": 20.0, "hot_spares": 1}
#: the spare itself fails this far into the recording (minute 50 of 2 h) after a precursor: an idle node warned,
#: whose answer is a drain (drawn apart from the rest: every other node is as without it)
SPARE_FAILURE_SHARE = 50.0 / 120.0
SPARE_FAILURE_MIN_MINUTES = 10.0  # the longest precursor lead: a shorter recording places none


def simulate_demo_telemetry(data_dir: str, nodes: int, hours: float, seed: int, io_slowdown=None,
                            workload: dict | None = None, say=lambda msg: None) -> dict:
    """The demo's cluster (``workload``, default :data:`DEMO_WORKLOAD` with the spare's failure) written to
    ``data_dir``; :func:`~hpcguard.simulators.telemetry.simulate_telemetry`'s result.  A seed whose spare
    already fails around that time keeps its own failures and gets no placed one (``say`` tells)."""
    from hpcguard.simulators.telemetry import SpareBusy, simulate_telemetry

    params = dict(DEMO_WORKLOAD if workload is None else workload)
    at = SPARE_FAILURE_SHARE * hours * 60.0
    if workload is None and at >= SPARE_FAILURE_MIN_MINUTES:
        params["spare_failure_minutes"] = at
    try:
        return simulate_telemetry(data_dir, nodes=nodes, hours=hours, seed=seed, io_slowdown=io_slowdown, **params)
    except SpareBusy as exc:
        say(f"no failure placed on the spare: {exc}")
        params.pop("spare_failure_minutes")
        return simulate_telemetry(data_dir, nodes=nodes, hours=hours, seed=seed, io_slowdown=io_slowdown, **params)


def _say(cfg: DemoConfig, msg: str) -> None:
    if not cfg.quiet:
        from rich.console import Console

        Console(stderr=True).print(f"[bold cyan]demo[/] {msg}")


def train_baseline_model(data_dirs: list[str], out_dir: str, persistence: int = 2,
                         sensor_map: str | None = None) -> dict[str, Any]:
    """Learn baseline bounds from the healthy windows of recorded directories."""
    from hpcguard.connectors.mapping import SensorMapping
    from hpcguard.connectors.recorded import load_failures, load_sensor_grid
    from hpcguard.models.baseline import BaselineDetector, healthy_windows

    mapping = SensorMapping.load(sensor_map)
    windows = []
    for d in data_dirs:
        grid = load_sensor_grid(d, grid_s=15.0, mapping=mapping)
        failures = load_failures(d)
        f_nodes, f_times = _failure_arrays(failures)
        index = {n: i for i, n in enumerate(grid.nodes)}
        steps = [(index[n], int((t - grid.t0) // grid.grid_s)) for n, t in zip(f_nodes, f_times) if n in index]
        windows.append(healthy_windows(grid.values, steps))
    all_windows = np.concatenate(windows) if windows else np.empty((0, 16, 10))
    if len(all_windows) < 100:
        raise ValueError(f"only {len(all_windows)} healthy windows in {data_dirs}: record more history")
    det = BaselineDetector(persistence=persistence).learn_many(all_windows)
    os.makedirs(out_dir, exist_ok=True)
    state = {**det.to_state(), "version": f"baseline-{uuid.uuid5(uuid.NAMESPACE_URL, ','.join(data_dirs)).hex[:8]}",
             "trained_on": data_dirs, "windows": int(len(all_windows))}
    Path(out_dir, "baseline.json").write_text(json.dumps(state, indent=1))
    return {"model": "baseline", "windows": int(len(all_windows)), "out": out_dir, "version": state["version"]}


def _failure_arrays(failures: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, times) of :func:`~hpcguard.connectors.recorded.load_failures`' array."""
    return failures["node"].astype(str), failures["time"].astype(float)


def demo_model(cfg: DemoConfig, workdir: Path) -> tuple[str, bool]:
    """The demo's detector trained on a separate history of the same simulator: from the
    cache when one with the same parameters and code exists, else trained and cached.

    Returns (model directory, whether it came from the cache).
    """
    train_nodes = cfg.nodes if cfg.detector == "baseline" else max(cfg.nodes, 64)
    train_hours = cfg.train_hours or (max(6.0, cfg.hours * 3) if cfg.detector == "baseline" else 24.0)
    key = f"{cfg.detector}-n{train_nodes}-h{train_hours:g}-s{cfg.seed + 1000}-{code_digest()}"
    if cfg.sensor_map:  # a model trained through another mapping is another model
        from hpcguard.connectors.mapping import SensorMapping

        key += f"-m{SensorMapping.load(cfg.sensor_map).digest[:8]}"
    cached = cache_root(cfg.cache_dir) / "demo-models" / key
    if (cached / "COMPLETE").exists():
        _say(cfg, f"{cfg.detector} detector from the cache: {cached}")
        return str(cached), True
    train_dir = workdir / "history"
    _say(cfg, f"training the {cfg.detector} detector on a separate history ({train_nodes} nodes × "
              f"{train_hours} h, seed {cfg.seed + 1000}); cached as {cached}")
    from hpcguard.simulators.telemetry import simulate_telemetry

    simulate_telemetry(str(train_dir), nodes=train_nodes, hours=train_hours, seed=cfg.seed + 1000)
    building = cached.with_name(f"{key}.{uuid.uuid4().hex[:8]}.tmp")
    train_model(str(train_dir), str(building), seed=cfg.seed, detector=cfg.detector, sensor_map=cfg.sensor_map)
    (building / "COMPLETE").write_text(json.dumps({"detector": cfg.detector, "nodes": train_nodes,
                                                   "hours": train_hours, "seed": cfg.seed + 1000}))
    try:
        building.rename(cached)  # atomic: a concurrent demo sees a whole model or none
    except OSError:
        import shutil

        shutil.rmtree(building, ignore_errors=True)  # another demo cached the same model first
    return str(cached), False


def run_demo(cfg: DemoConfig) -> dict[str, Any]:
    from hpcguard.connectors.broker import EmbeddedBroker
    from hpcguard.connectors.kafka import wait_for_broker

    if cfg.workers < 1:
        raise ValueError("--workers must be >= 1")
    workdir = Path(cfg.workdir or tempfile.mkdtemp(prefix="hpcguard-demo-")).absolute()  # ledger paths are absolute
    workdir.mkdir(parents=True, exist_ok=True)
    broker = None
    try:
        if cfg.bootstrap:
            bootstrap, broker_desc = cfg.bootstrap, f"external {cfg.bootstrap}"
        else:
            broker = EmbeddedBroker(log_path=str(workdir / "broker.log")).start()
            bootstrap, broker_desc = broker.bootstrap, f"embedded tansu {broker.bootstrap}"
        _say(cfg, f"broker: {broker_desc}")
        settings = Settings.load().with_overrides(
            kafka=dict(bootstrap=bootstrap),
            topics=dict(partitions=max(Settings.load().topics.partitions, cfg.workers)),
            worker=dict(app_id=f"hpcguard-demo-{uuid.uuid4().hex[:8]}", data_dir=str(workdir / "worker"),
                        sensor_map=cfg.sensor_map or Settings.load().worker.sensor_map),
            adapter=dict(kind="dry-run", audit_log=str(workdir / "actions-audit.jsonl"),
                         ledger=str(workdir / "ledger.sqlite")))
        k = settings.kafka
        wait_for_broker(k)

        data_dir = workdir / "telemetry"
        _say(cfg, f"simulating {cfg.nodes} nodes × {cfg.hours} h (seed {cfg.seed}) → {data_dir}")
        # --- PFS scenario (CanarIO): slowdown episodes + probes.csv; evaluation telemetry only ---
        from hpcguard.simulators.demo_scenario import pfs_scenario
        from hpcguard.simulators.telemetry import DEFAULT_START
        pfs = pfs_scenario(str(data_dir), start=DEFAULT_START, hours=cfg.hours, seed=cfg.seed, nodes=cfg.nodes)
        simulate_demo_telemetry(str(data_dir), cfg.nodes, cfg.hours, cfg.seed, pfs["io_slowdown"], cfg.workload,
                                say=lambda msg: _say(cfg, msg))
        from hpcguard.simulators.demo_scenario import train_job_classifier, write_job_scripts
        write_job_scripts(str(data_dir), seed=cfg.seed)  # batch scripts ride on the jobs' submit events
        _say(cfg, f"training the PRIONN job classifier on a separate PFS history (seed {cfg.seed + 2000})")
        clf = train_job_classifier(str(workdir / "job_classifier.pt"), seed=cfg.seed + 2000)
        pfs["env"]["HPCGUARD_WORKER__JOB_CLASSIFIER"] = clf["path"]
        # --- end PFS scenario ---

        model_dir, from_cache = (cfg.model, False) if cfg.model else demo_model(cfg, workdir)
        env = {**pfs["env"], **(cfg.worker_env or {})}  # PFS scenario: worker CanarIO settings
        # a false-alarm budget is a rate per 100 node-days: the demo's few node-days cannot measure one, and the
        # model's prior would set it from its training history alone; the demo decides on the model's own threshold
        # unless told otherwise (a site's shadow run measures its budget: docs/site-guide.md)
        budget = float(env.setdefault("HPCGUARD_WORKER__FALSE_ALARMS",
                                      os.environ.get("HPCGUARD_WORKER__FALSE_ALARMS", "0")))
        settings = settings.with_overrides(worker=dict(false_alarms=budget))
        if cfg.sensor_map:
            env["HPCGUARD_WORKER__SENSOR_MAP"] = cfg.sensor_map
        # the site's inventory: the IO windows wait for every node, whichever worker normalizes its samples
        meta = json.loads((data_dir / "meta.json").read_text())
        env.setdefault("HPCGUARD_DOOR__NODES", ",".join(meta["nodes"]))
        if meta.get("hot_spares"):  # the scenario's spare node: the workers and the offline side both know it
            env.setdefault("HPCGUARD_POLICY__HOT_SPARES", ",".join(meta["hot_spares"]))
            settings = settings.with_overrides(policy=dict(hot_spares=env["HPCGUARD_POLICY__HOT_SPARES"]))
        if cfg.influx:
            env["HPCGUARD_INFLUX__URL"] = cfg.influx
            env["HPCGUARD_INFLUX__VERSION"] = str(cfg.influx_version)
        run = run_pipeline(settings, data_dir, model_dir, workdir, cfg.workers, cfg.speed, env, cfg.quiet,
                           cfg.timeout_s, cfg.metrics_port, settle=True, preload=cfg.preload,
                           restart_workers=cfg.restart_workers)
        summary = build_summary(k, run["topics"], data_dir, broker_desc, cfg, run["counters"], run["replayed"],
                                run["elapsed"])
        summary["model_dir"], summary["model_from_cache"] = model_dir, from_cache
        summary["worker_restarts"] = run["restarts"]
        summary["false_alarm_budget"] = budget  # per 100 node-days; 0: the model's own threshold
        summary["savings"] = demo_savings(data_dir, [a for a, _ in read_topic(k, run["topics"].actions)], settings,
                                          workdir)
        if cfg.offline:
            from hpcguard.simulators.parity import compare, offline_decisions

            _say(cfg, "computing the offline decisions on the same files (parity)")
            offline = offline_decisions(str(data_dir), model_dir, settings)
            diff = compare(offline, {"predictions": [p for p, _ in read_topic(k, run["topics"].predictions)],
                                     "actions": [a for a, _ in read_topic(k, run["topics"].actions)]})
            (workdir / "parity.json").write_text(json.dumps(diff, indent=1))  # the differences, listed
            summary["offline"] = {"warned": _warned(offline["predictions"], data_dir),
                                  "action_ids": sorted(a["action_id"] for a in offline["actions"]),
                                  "differences": diff["counts"], "report": str(workdir / "parity.json")}
            # CanarIO's decisions (not part of the parity above): the io role replayed in event time
            from hpcguard.simulators.demo_scenario import offline_io_actions

            io_off = {a["action_id"] for a in offline_io_actions(str(data_dir), env, settings)["actions"]}
            io_on = set(summary["action_ids_by_source"].get("canario", []))
            summary["offline"]["io_actions"] = {"offline": len(io_off), "online": len(io_on),
                                                "identical": io_off == io_on,
                                                "only_offline": sorted(io_off - io_on)[:20],
                                                "only_online": sorted(io_on - io_off)[:20]}
        return summary
    finally:
        if broker is not None:
            broker.stop()


def demo_savings(data_dir: Path, actions: list[dict], settings: Settings, workdir: Path) -> dict[str, Any]:
    """The run's actions accounted in node-hours (``hpcguard evaluate savings`` on the published
    actions): the headline, per kind, each protected job with the failure it answered, and a plot."""
    from hpcguard.simulators.savings_report import evaluate_savings, write_savings_plot

    s = evaluate_savings(data_dir, settings=settings, actions=actions, horizon_s=60.0 * settings.policy.quiet_minutes)
    (workdir / "savings.json").write_text(json.dumps(s, indent=1))
    plot = write_savings_plot(s, workdir / "savings.png")
    return {"net_node_hours": round(s["net"], 3), "saved_node_hours": round(s["saved"], 3),
            "spent_node_hours": round(s["spent"], 3), "ci95_net": s["ci95"]["net"],
            "without_node_hours_lost": round(s["without_node_hours_lost"], 3),
            "net_per_1000_node_days": s["net_per_1000_node_days"],
            "by_kind": s["by_kind"], "protected": s["protected"],
            "false_alarm_actions": len(s["false_alarm_actions"]), "report": str(workdir / "savings.json"),
            "plot": plot}


def _warned(predictions: list[dict], data_dir: Path) -> int:
    """Injected failures warned by these predictions (the summary's ``warned``)."""
    from hpcguard.connectors.recorded import load_failures
    from hpcguard.models.warning_eval import score_warnings

    warn = [(p["node"], p["sample_time"]) for p in predictions if p.get("warn")]
    f_nodes, f_times = _failure_arrays(load_failures(str(data_dir)))
    return int(score_warnings(np.array([w[0] for w in warn]), np.array([w[1] for w in warn], float),
                              f_nodes, f_times)["warned"])


def train_model(history_dir: str, model_dir: str, seed: int, detector: str = "baseline",
                sensor_map: str | None = None) -> dict[str, Any]:
    """Train the demo's detector on a separate history: the baseline, or the failure
    ensemble through ``hpcguard train failure`` (the same command users run)."""
    if detector == "baseline":
        return train_baseline_model([history_dir], model_dir, sensor_map=sensor_map)
    if detector != "ensemble":
        raise ValueError(f"unknown detector {detector!r}: baseline or ensemble")
    # seed 000's system: its feature set and setting (a site's default borrows 24 simulated histories)
    argv = [sys.executable, "-m", "hpcguard", "train", "failure", "--data", history_dir, "--out", model_dir,
            "--features", "paper", "--seed", str(seed), "--json"] + (["--sensor-map", sensor_map] if sensor_map else [])
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"training the failure ensemble failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def build_summary(k: KafkaSettings, topics: TopicNames, data_dir: Path, broker_desc: str, cfg: DemoConfig,
                  counters: dict[str, dict[str, float]], replayed: int, elapsed: float) -> dict[str, Any]:
    from hpcguard.connectors.recorded import load_failures
    from hpcguard.models.warning_eval import score_warnings

    samples = {t: int(counters["samples"].get(t, 0)) for t in (topics.samples_ipmi, topics.samples_os,
                                                                topics.samples_io)}
    predictions = read_topic(k, topics.predictions)
    actions = read_topic(k, topics.actions)
    acks = read_topic(k, topics.acks)
    dead = read_topic(k, topics.dlq)
    io_windows = read_topic(k, topics.io_degradation)

    warn = [(p["node"], p["sample_time"]) for p, _ in predictions if p.get("warn")]
    f_nodes, f_times = _failure_arrays(load_failures(str(data_dir)))
    scores = score_warnings(np.array([w[0] for w in warn]), np.array([w[1] for w in warn], float), f_nodes, f_times)
    # trigger_time: wall time (s) the triggering raw record reached Kafka; ts: the action's broker time (ms)
    latencies_ms = [ts - 1000.0 * a["trigger_time"] for a, ts in actions if a.get("trigger_time")]
    model = predictions[0][0]["model"] if predictions else "none"
    lead = scores["lead_minutes"]
    return {
        "broker": broker_desc,
        "nodes": cfg.nodes,
        "hours": cfg.hours,
        "seed": cfg.seed,
        "model": model,
        # what normalize published: samples (each sample of a NodeSamples batch: the record count depends on how
        # the inputs were batched, this does not), job events and job-progress markers
        "published": {"samples.ipmi": samples[topics.samples_ipmi], "samples.os": samples[topics.samples_os],
                      "samples.io": samples[topics.samples_io], "jobs": int(counters["out"].get(topics.jobs, 0))},
        "replayed_records": replayed,
        "dead_letters": {"total": len(dead), "by_kind": dict(Counter(d["error_kind"] for d, _ in dead))},
        "predictions": {"total": len(predictions), "warn": len(warn)},
        "io_windows": {"total": len(io_windows), "degraded": sum(1 for w, _ in io_windows if w.get("degraded"))},
        "failures": {**{k2: v for k2, v in scores.items() if k2 != "lead_minutes"},
                     "lead_minutes": lead,
                     "lead_minutes_median": float(np.median(lead)) if lead else None},
        "actions": dict(sorted(Counter(a["kind"] for a, _ in actions).items())),
        "action_ids": sorted(a["action_id"] for a, _ in actions),
        "action_ids_by_source": {src: sorted(a["action_id"] for a, _ in actions if a["source"] == src)
                                 for src in sorted({a["source"] for a, _ in actions})},
        "actions_on_job_at_sample_time": _job_check(data_dir, [a for a, _ in actions]),
        # CanarIO's IO-aware actions, each with the job it names (and the job replacing it)
        "io_actions": [{"kind": a["kind"], "job_id": a["job_id"],
                        "window_end": (a.get("reason") or {}).get("window_end"),
                        **({"replacement_job_id": a["reason"]["replacement_job_id"]}
                           if (a.get("reason") or {}).get("replacement_job_id") else {})}
                       for a, _ in sorted(actions, key=lambda x: (x[0]["time"], x[0]["action_id"]))
                       if a.get("source") == "canario"],
        "replay": {"speed": cfg.speed, "workers": cfg.workers},
        "actions_by_source": dict(sorted(Counter(f"{a['source']}:{a['kind']}" for a, _ in actions).items())),
        "acks": dict(sorted(Counter(a["status"] for a, _ in acks).items())),
        "throughput_msgs_per_s": round(replayed / elapsed, 1) if elapsed > 0 else None,
        # untimed: actions of windows closed by idleness (a quiet node let them go), with no triggering sample
        "latency_ms": {**percentiles(latencies_ms), "untimed": len(actions) - len(latencies_ms)},
        "elapsed_s": round(elapsed, 1),
    }


def _job_check(data_dir: Path, actions: list[dict]) -> dict[str, int]:
    """How many migrate/checkpoint actions name the job that ran on the warned node at the
    warning's sample time (the temporal join), from the recorded sacct file."""
    from hpcguard.simulators.parity import load_job_events
    from hpcguard.models.jobs import JobTimeline

    timeline = JobTimeline().extend(load_job_events(str(data_dir)))
    checked = right = 0
    for a in actions:
        reason = a.get("reason") or {}
        if a.get("kind") not in ("migrate", "checkpoint") or "sample_time" not in reason:
            continue
        checked += 1
        job = timeline.job_at(reason["predicted_node"], float(reason["sample_time"]))
        right += int(job is not None and job["job_id"] == a.get("job_id"))
    return {"checked": checked, "right_job": right}


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50 and p99 of ``values`` (rounded to 0.1) and their count; ``None`` for none."""
    if not values:
        return {"p50": None, "p99": None, "n": 0}
    arr = np.asarray(values)
    return {"p50": round(float(np.percentile(arr, 50)), 1), "p99": round(float(np.percentile(arr, 99)), 1),
            "n": int(arr.size)}

