"""CLI commands of the failure ensemble (seed 000 ch. 4): ``hpcguard uc``,
``hpcguard train failure`` and ``hpcguard evaluate failure``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from hpcguard.cli import app, emit_json, evaluate_app, fail, train_app


@app.command("uc")
def uc(
    fpr: float = typer.Option(..., "--fpr", help="Per-node false-positive rate of the predictor (0..1)."),
    nodes: int = typer.Option(..., "--nodes", min=0, help="Number of nodes n of the job."),
    p_ok: float = typer.Option(1.0, "--p-ok", help="P(K), probability of sampling an ok event (seed 000 Eq. 4.1; "
                               "MOGON I: 0.9999900347)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON with key 'uc'."),
) -> None:
    """Probability of an unnecessary checkpoint UC(n) for a job on N nodes (seed 000 Eq. 4.4)."""
    from hpcguard.models.metrics import uc_crossing, uc_probability

    try:
        value = float(uc_probability(fpr, nodes, p_ok))
        crossings = {f"nodes_uc_{int(lv * 100)}": uc_crossing(fpr, lv, p_ok) for lv in (0.05, 0.3, 0.5)}
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        emit_json({"fpr": fpr, "nodes": nodes, "p_ok": p_ok, "uc": value, **crossings})
    else:
        typer.echo(f"UC({nodes}) = {value:.6g}  (fpr={fpr:g}, P(K)={p_ok:g})")


def _load_recorded(data_dir: str, grid_s: float = 15.0):
    """(values, t0, failure node indices, failure times, node names) of a recorded-data directory."""
    from hpcguard.connectors.recorded import load_failures, load_sensor_grid

    d = Path(data_dir)
    if not d.is_dir():
        fail(f"data directory not found: {d}")
    if not (d / "failures.csv").is_file():
        fail(f"{d} has no failures.csv (ground-truth labels are needed to train or evaluate)")
    try:
        grid = load_sensor_grid(str(d), grid_s=grid_s)
        failures = load_failures(str(d))
    except (ValueError, OSError) as exc:
        fail(f"cannot load recorded telemetry from {d}: {exc}")
    import numpy as np

    index = {name: i for i, name in enumerate(grid.nodes)}
    names = [str(n) for n in failures["node"]]
    unknown = sorted({n for n in names if n not in index})
    if unknown:
        fail(f"{d}/failures.csv names nodes without telemetry: {', '.join(unknown[:5])}")
    fnodes = np.array([index[n] for n in names], dtype=int)
    ftimes = np.asarray(failures["time"], dtype=float)
    return grid.values, float(grid.t0), fnodes, ftimes, list(grid.nodes)


def _progress(disabled: bool):
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True, disable=disabled)


@train_app.command("failure")
def train_failure(
    data: List[str] = typer.Option(..., "--data", help="Recorded-data directory (hpcguard simulate telemetry "
                                   "format, with failures.csv); repeat for several."),
    out: str = typer.Option(..., "--out", help="Model directory to write (created)."),
    seed: int = typer.Option(0, "--seed", help="Random seed (splits, initialisation, sampling)."),
    ok_ratio: float = typer.Option(10.0, "--ok-ratio", min=1.0, help="ok:failure events for the networks "
                                   "(seed 000: 10)."),
    calibration_ok: int = typer.Option(20000, "--calibration-ok", min=0,
                                       help="Extra healthy events for the LSTM voter and its ROC threshold."),
    target_fpr: Optional[float] = typer.Option(None, "--target-fpr", help="Choose the LSTM threshold for this "
                                               "fpr (unset: highest tpr at the lowest fpr step, as seed 000)."),
    mc_splits: int = typer.Option(3, "--mc-splits", min=1, help="Monte-Carlo cross-validation splits per network."),
    as_json: bool = typer.Option(False, "--json", help="Print the training report as JSON."),
) -> None:
    """Train the six lead-time networks and the LSTM voter on recorded telemetry."""
    import numpy as np
    import torch

    from hpcguard import __version__
    from hpcguard.connectors.model_store import digest_dirs, save_model
    from hpcguard.models.failure.dataset import Events, build_events
    from hpcguard.models.failure.training import train_ensemble

    torch.set_num_threads(1)
    parts, calib = [], []
    with _progress(as_json) as bar:
        task = bar.add_task("loading telemetry", total=None)
        for k, d in enumerate(data):
            bar.update(task, description=f"loading {d}")
            values, t0, fn, ft, _ = _load_recorded(d)
            try:
                parts.append(build_events(values, t0, 15.0, fn, ft, ok_ratio=ok_ratio, seed=seed + k))
                cal = build_events(values, t0, 15.0, fn, ft, max_ok=calibration_ok // len(data), seed=seed + 1000 + k)
            except ValueError as exc:
                fail(f"{d}: {exc}")
            calib.append(cal.subset(np.flatnonzero(cal.labels == 0)))
        events = Events(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("features", "labels", "nodes",
                                                                                   "times")))
        calibration = Events(*(np.concatenate([getattr(p, f) for p in calib]) for f in ("features", "labels",
                                                                                         "nodes", "times")))
        try:
            ensemble, report = train_ensemble(events, seed=seed, calibration=calibration, mc_splits=mc_splits,
                                              target_fpr=target_fpr,
                                              progress=lambda m: bar.update(task, description=f"training {m}"))
        except ValueError as exc:
            fail(str(exc))
        bar.update(task, description="writing model")
        digest = digest_dirs(data)
        ensemble.version = f"failure-ensemble-{digest[:12]}-s{seed}"
        metrics = {"lstm": {k: report["voter"][k] for k in ("threshold", "tpr", "fpr", "auc")},
                   "networks": [{k: r[k] for k in ("lead_minutes", "cv_tpr", "cv_fpr", "val_loss")}
                                for r in report["networks"]], "training": report}
        meta = {"hpcguard_version": __version__, "data_dirs": [str(Path(d).resolve()) for d in data],
                "training_data_sha256": digest, "seed": seed, "ok_ratio": ok_ratio,
                "events": report["events"], "failures": report["failures"], "metrics": metrics}
        try:
            save_model(ensemble, out, meta)
        except OSError as exc:
            fail(f"cannot write model to {out}: {exc}")
    summary = {"model": str(out), "version": ensemble.version, "events": report["events"],
               "failures": report["failures"], "lstm_threshold": ensemble.threshold, **metrics["lstm"],
               "networks": metrics["networks"]}
    if as_json:
        emit_json(summary)
    else:
        typer.echo(f"wrote {out} ({ensemble.version}): {report['events']} events, {report['failures']} failures; "
                   f"LSTM threshold {ensemble.threshold:.4g} (validation tpr {summary['tpr']:.3f}, "
                   f"fpr {summary['fpr']:.2g})")


def _comparison_rows(train_dirs: list[str], test, seed: int) -> tuple[list[dict], list[str]]:
    """Random forest on the same features and the baseline detector, trained on ``train_dirs``."""
    import numpy as np

    from hpcguard.models.failure.dataset import build_events, event_windows, impute, learn_imputation
    from hpcguard.models.failure.evaluation import report_row

    notes: list[str] = []
    values_test, t0_test, events = test
    feats, ys, wins = [], [], []
    for k, d in enumerate(train_dirs):
        values, t0, fn, ft, _ = _load_recorded(d)
        ev = build_events(values, t0, 15.0, fn, ft, seed=seed + k)
        feats.append(ev.features[:, 0])
        ys.append(ev.labels)
        healthy = ev.subset(np.flatnonzero(ev.labels == 0))
        wins.append(event_windows(values, healthy.nodes, healthy.times, t0, 15.0, lead_minutes=2))
    x, y = np.concatenate(feats), np.concatenate(ys)
    rows = []
    from sklearn.ensemble import RandomForestClassifier

    med = learn_imputation(x)
    rf = RandomForestClassifier(n_estimators=200, random_state=seed, n_jobs=1).fit(impute(x, med), y)
    rows.append(report_row("random-forest@2min", events.labels,
                           rf.predict_proba(impute(events.features[:, 0], med))[:, 1] > 0.5))
    try:
        from hpcguard.models.baseline import BaselineDetector
    except ImportError:
        notes.append("baseline row omitted: hpcguard.models.baseline.BaselineDetector not available")
        return rows, notes
    det = BaselineDetector().learn_many(np.concatenate(wins))
    # persistence: the window ending 2 min before the event and the one a step earlier both break a bound
    now = event_windows(values_test, events.nodes, events.times, t0_test, 15.0, lead_minutes=2)
    before = event_windows(values_test, events.nodes, events.times - 15.0, t0_test, 15.0, lead_minutes=2)
    warn = (det.score_many(now) > 0) & (det.score_many(before) > 0)
    rows.append(report_row(f"baseline-threshold@2min(persistence={det.persistence})", events.labels, warn))
    return rows, notes


@evaluate_app.command("failure")
def evaluate_failure(
    model: str = typer.Option(..., "--model", help="Model directory written by 'hpcguard train failure'."),
    data: str = typer.Option(..., "--data", help="Held-out recorded-data directory (with failures.csv)."),
    report: str = typer.Option(..., "--report", help="Output directory for report.json, report.md and PNG plots."),
    train_data: Optional[List[str]] = typer.Option(None, "--train-data", help="Training directories for the "
                                                   "random-forest and baseline rows (unset: the model's)."),
    max_ok: int = typer.Option(50000, "--max-ok", min=100, help="Healthy events sampled for the fpr."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    online: bool = typer.Option(True, "--online/--no-online", help="Also run the ensemble at every 15 s step "
                                "of every node, as the node agent does."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON (name, tpr, ppv, fpr, uc_1024)."),
) -> None:
    """Table-4.1-style report: unanimous 1/2/4/6, LSTM vote, single network, baseline and random forest."""
    import numpy as np
    import torch

    from hpcguard.connectors.model_store import load_model
    from hpcguard.models.failure.dataset import build_events, healthy_mask
    from hpcguard.models.failure.evaluation import ensemble_rows, online_scan, online_summary

    torch.set_num_threads(1)
    try:
        ensemble, manifest = load_model(model)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    out = Path(report)
    out.mkdir(parents=True, exist_ok=True)
    with _progress(as_json) as bar:
        task = bar.add_task(f"loading {data}", total=None)
        values, t0, fn, ft, _ = _load_recorded(data)
        try:
            events = build_events(values, t0, ensemble.grid_s, fn, ft, max_ok=max_ok, seed=seed + 7)
        except ValueError as exc:
            fail(f"{data}: {exc}")
        if events.labels.sum() == 0 or (events.labels == 0).sum() == 0:
            fail(f"{data}: need both failures and healthy operation to evaluate")
        bar.update(task, description="ensemble rows")
        rows, scores = ensemble_rows(ensemble, events.features, events.labels)
        notes = []
        dirs = list(train_data or manifest.get("metadata", {}).get("data_dirs", []))
        dirs = [d for d in dirs if Path(d).is_dir()]
        if dirs:
            bar.update(task, description="random forest and baseline")
            extra, notes = _comparison_rows(dirs, (values, t0, events), seed)
            rows.extend(extra)
        else:
            notes.append("random-forest and baseline rows omitted: no training data directory available "
                         "(pass --train-data)")
        result = {"model": str(model), "version": ensemble.version, "data": str(data),
                  "failures": int(events.labels.sum()), "ok_events": int((events.labels == 0).sum()),
                  "rows": rows, "notes": notes}
        if online:
            bar.update(task, description="online scan (every node, every step)")
            scan = online_scan(ensemble, values, t0, ensemble.grid_s)
            healthy = healthy_mask(values.shape[0], values.shape[1], t0, ensemble.grid_s, fn, ft)
            result["online"] = online_summary(scan, fn, ft, healthy)
        bar.update(task, description="plots")
        _plots(out, ensemble, events.labels, scores, rows)
    (out / "report.json").write_text(json.dumps(_clean(result), indent=2))
    (out / "report.md").write_text(_markdown(result))
    if as_json:
        emit_json([{k: r[k] for k in ("name", "tpr", "ppv", "fpr", "uc_1024")} | {
            k: r[k] for k in r if k.startswith("nodes_uc_")} for r in rows])
    else:
        typer.echo(_markdown(result))


def _clean(obj):
    from hpcguard.cli import _jsonable

    return _jsonable(obj)


def _markdown(result: dict) -> str:
    lines = [f"# Failure prediction on {result['data']}", "",
             f"model {result['version']}; {result['failures']} failure events, {result['ok_events']} ok events", "",
             "| predictor | tpr | ppv | fpr | UC(1024) | n@UC 5% | n@UC 30% | n@UC 50% |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['name']} | {r['tpr']:.4f} | {r['ppv']:.4f} | {r['fpr']:.6f} | {r['uc_1024']:.4f} | "
                     f"{r['nodes_uc_5']} | {r['nodes_uc_30']} | {r['nodes_uc_50']} |")
    if "online" in result:
        lines += ["", "Online (every node, every 15 s step): " + json.dumps(_clean(result["online"]))]
    lines += [""] + [f"- {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"


def _plots(out: Path, ensemble, labels, scores, rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from hpcguard.models.metrics import roc, uc_probability

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i, lead in enumerate(ensemble.leads):
        c = roc(labels, scores["network_probabilities"][:, i])
        ax.plot(np.maximum(c["fpr"], 1e-6), c["tpr"], label=f"{lead} min (AUC {c['auc']:.3f})")
    c = roc(labels, scores["vote_probability"])
    ax.plot(np.maximum(c["fpr"], 1e-6), c["tpr"], "k--", label=f"LSTM vote (AUC {c['auc']:.3f})")
    ax.set_xscale("log")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title("ROC per lead-time network")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "roc_networks.png", dpi=120)
    plt.close(fig)

    n = 2 ** np.arange(0, 19)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for r in rows:
        if r["fpr"] == r["fpr"]:
            ax.plot(n, uc_probability(r["fpr"], n), marker=".", label=r["name"])
    for level in (0.05, 0.3, 0.5):
        ax.axhline(level, color="grey", lw=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("nodes of the job")
    ax.set_ylabel("UC(n)")
    ax.set_title("Probability of an unnecessary checkpoint (Eq. 4.4)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "uc_nodes.png", dpi=120)
    plt.close(fig)
