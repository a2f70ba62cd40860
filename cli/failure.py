"""CLI commands of the failure ensemble (seed 000 ch. 4): ``hpcguard uc``, ``hpcguard train failure``,
``hpcguard train threshold``, ``hpcguard evaluate failure`` and ``hpcguard evaluate cross-profile``.

Each parses its options, calls one function and prints: training is
``simulators.failure_training`` (over the pure ``models.failure.site_training``), the evaluation
report ``simulators.failure_report``, the experiment ``simulators.cross_profile``.  What the
options mean at length: docs/site-guide.md.
"""
from __future__ import annotations

from typing import Any, List, Optional

import typer

from hpcguard.cli.common import app, emit_json, evaluate_app, fail, load_settings, train_app
from hpcguard.models.failure.site_training import TrainingError
from hpcguard.simulators import failure_training as ft

COMMON, CALIBRATION, ADVANCED = "Common", "Calibration", "Advanced"
PRIOR, SWITCHES, SCAN = "Simulated prior", "Switches (docs/site-guide.md)", "Online scan"


@app.command("uc")
def uc(
    fpr: float = typer.Option(..., "--fpr", metavar="RATE", help="Per-node false-positive rate (0..1)."),
    nodes: int = typer.Option(..., "--nodes", min=0, metavar="N", help="Nodes n of the job."),
    p_ok: float = typer.Option(1.0, "--p-ok", metavar="P", help="P(ok event), Eq. 4.1."),
    as_json: bool = typer.Option(False, "--json", metavar="", help="Print JSON with key 'uc'."),
) -> None:
    """Chance UC(n) of an unnecessary checkpoint for a job on n nodes.

    Seed 000 Eq. 4.4; P(K) of Eq. 4.1 on MOGON I: 0.9999900347.
    """
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


def _run(fn, *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)``, a :class:`TrainingError` as the command's error."""
    try:
        return fn(*args, **kwargs)
    except TrainingError as exc:
        fail(str(exc))


def _simulated_prior(profiles: str, histories: int, cache: Optional[str], progress=None):
    """:func:`~hpcguard.simulators.failure_training.prior_histories`, its errors as the command's."""
    return _run(ft.prior_histories, profiles, histories, cache, progress)


def _notify(kind: str, message: str) -> None:
    typer.secho(f"{kind}: {message}", err=True, fg=typer.colors.YELLOW)


def _progress(disabled: bool):
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True, disable=disabled)


def _spinner(bar, first: str):
    task = bar.add_task(first, total=None)
    return lambda m: bar.update(task, description=m)


def _opt(default, *names: str, panel: str = ADVANCED, **kw):
    """An option of one help line in ``panel``."""
    return typer.Option(default, *names, rich_help_panel=panel, **kw)


DATA = _opt(..., "--data", panel=COMMON, metavar="DIR", help="History; repeatable.")
SENSOR_MAP = _opt(None, "--sensor-map", panel=COMMON, metavar="FILE", show_default="built-in", help="Sensor map.")
CONFIG = _opt(None, "--config", panel=COMMON, metavar="FILE", help="Settings (also HPCGUARD_CONFIG).")
TARGET_FPR = _opt(None, "--target-fpr", panel=CALIBRATION, metavar="RATE", show_default="2e-4",
                  help="Vote's fpr.")
FPR_CONFIDENCE = _opt(None, "--fpr-confidence", panel=CALIBRATION, min=0, max=0.999, metavar="P",
                      show_default="0.95", help="Bound's level.")
CALIBRATION_OK = _opt(None, "--calibration-ok", panel=CALIBRATION, min=0, metavar="N", show_default="300000",
                      help="Ok events.")
CALIBRATION_SPAN = _opt("validation", "--calibration-span", panel=CALIBRATION, metavar="SPAN", help="Or history.")
# on/off switches: their names say what they do, the line keeps only the default (at length: the site guide)
FPR_SPREAD = _opt(None, "--fpr-history-spread/--no-fpr-history-spread", panel=SWITCHES, metavar="",
                  show_default="on")
PERSISTENCE = _opt(None, "--persistence", panel=CALIBRATION, min=1, metavar="N", show_default="2",
                   help="Steps in a row.")
MC_SPLITS = _opt(None, "--mc-splits", min=1, metavar="N", show_default="2", help="CV splits.")
LOOK_ALIKES = _opt(None, "--simulated-look-alikes", min=0, max=400, metavar="K", show_default="8/0",
                   help="Look-alikes.")
SEED = _opt(0, "--seed", metavar="N", help="Random seed.")
STRIDE = _opt(1, "--scan-stride", min=1, metavar="N", help="Scan every N-th step.")
JSON = _opt(False, "--json", panel=COMMON, metavar="", help="Print JSON.")


@train_app.command("failure")
def train_failure(
    data: List[str] = DATA,
    out: str = _opt(..., "--out", panel=COMMON, metavar="DIR", help="Model directory."),
    features: str = _opt("trees", "--features", panel=COMMON, metavar="SET", help="Feature set."),
    sensor_map: Optional[str] = SENSOR_MAP,
    config: Optional[str] = CONFIG,
    simulated_prior: Optional[int] = _opt(None, "--simulated-prior", panel=PRIOR, min=0, max=400, metavar="K",
                                          show_default="24", help="Histories."),
    prior_profile: str = _opt(ft.PRIOR_PROFILE, "--prior-profile", panel=PRIOR, metavar="NAMES",
                              help="Profiles."),
    cache_dir: Optional[str] = _opt(None, "--cache-dir", panel=COMMON, metavar="DIR",
                                    show_default="~/.cache/hpcguard", help="Prior cache."),
    as_json: bool = JSON,
    target_fpr: Optional[str] = TARGET_FPR,
    fpr_confidence: Optional[float] = FPR_CONFIDENCE,
    calibration_ok: Optional[int] = CALIBRATION_OK,
    calibration_span: str = CALIBRATION_SPAN,
    fpr_run_minutes: Optional[float] = _opt(None, "--fpr-run-minutes", panel=CALIBRATION, min=0, max=1440,
                                            metavar="M", show_default="0", help="Runs of M minutes."),
    split_days: Optional[float] = _opt(None, "--split-days", panel=CALIBRATION, min=0, max=365, metavar="D",
                                       show_default="0", help="Parts of D days."),
    persistence: Optional[int] = PERSISTENCE,
    fpr_history_spread: Optional[bool] = FPR_SPREAD,
    lead_shift: bool = _opt(True, "--lead-shift/--no-lead-shift", panel=SWITCHES, metavar="", show_default="on"),
    hard_negatives: bool = _opt(True, "--hard-negatives/--no-hard-negatives", panel=SWITCHES, metavar="",
                                show_default="on"),
    seed: int = SEED,
    ok_ratio: float = _opt(10.0, "--ok-ratio", min=1, metavar="R", help="ok:failure events."),
    mc_splits: Optional[int] = MC_SPLITS,
    positive_shifts: int = _opt(0, "--positive-shifts", min=0, metavar="N", help="Earlier copies."),
    simulated_look_alikes: Optional[int] = _opt(None, "--simulated-look-alikes", panel=PRIOR, min=0, max=400,
                                                metavar="K", show_default="8/0", help="Look-alikes."),
    allow_missing: Optional[List[str]] = _opt(None, "--allow-missing", metavar="SENSOR",
                                              help="Train without it; repeat."),
) -> None:
    """Train the failure ensemble on recorded histories.

    Six lead-time networks and the LSTM voter. Feature sets: trees, robust, site,
    conv; paper (seed 000's setting: no prior, seed 000's threshold rule). Options
    not given take the set's setting, which the output names; docs/site-guide.md.
    """
    settings = load_settings(config)  # [ldms] netdev_interfaces, [ipmi] input, worker.sensor_map
    with _progress(as_json) as bar:
        summary = _run(ft.train_failure_model, data, out, sensor_map=sensor_map, settings=settings,
                       features=features, seed=seed, ok_ratio=ok_ratio, calibration_ok=calibration_ok,
                       target_fpr=target_fpr, fpr_confidence=fpr_confidence, fpr_run_minutes=fpr_run_minutes,
                       fpr_history_spread=fpr_history_spread, calibration_span=calibration_span,
                       split_days=split_days, mc_splits=mc_splits, persistence=persistence, lead_shift=lead_shift,
                       allow_missing=tuple(allow_missing or ()), hard_negatives=hard_negatives,
                       positive_shifts=positive_shifts, simulated_prior=simulated_prior,
                       simulated_look_alikes=simulated_look_alikes, prior_profile=prior_profile,
                       cache_dir=cache_dir, progress=_spinner(bar, "loading telemetry"), notify=_notify)
    meta = summary.pop("metadata")
    if as_json:
        emit_json(summary)
        return
    s = summary["setting"]
    target, confidence, span, runs, spread, days = (s[k] for k in ("target_fpr", "fpr_confidence",
                                                                   "calibration_span", "fpr_run_minutes",
                                                                   "fpr_history_spread", "split_days"))
    typer.echo("coverage: " + ", ".join(f"{k} {v:.0%}" for k, v in summary["coverage"].items()))
    typer.echo(f"setting ({'seed 000' if features == 'paper' else 'site'} defaults where not given): features "
               f"{summary['features']}, target fpr "
               + ("none (seed 000's rule)" if target is None else f"{target:g}"
                  + (f" kept with {100 * confidence:g} % confidence" if confidence else " (point estimate)"))
               + f", {s['calibration_ok']} calibration events of the "
               f"{'whole history' if span == 'history' else 'validation period'}, persistence {s['persistence']}, "
               f"{s['mc_splits']} MC splits, "
               f"{s['simulated_prior']} simulated prior histories, {s['simulated_look_alikes']} look-alike-only "
               "histories")
    lo, hi = summary["tpr_ci95"]
    parts = meta.get("own_parts", len(data))
    typer.echo(f"wrote {out} ({summary['version']}): {summary['events']} events, {summary['failures']} failures, "
               f"{summary['hard_negatives']} hard negatives; LSTM threshold {summary['lstm_threshold']:.4g} chosen "
               f"on {summary['validation_failures']} later validation failures and {summary['validation_ok']} ok "
               f"events of the site{' (its whole history)' if span == 'history' else ''} weighed by the node-steps "
               f"each stands for (tpr {summary['tpr']:.3f}, 95 % CI "
               f"{lo:.2f}-{hi:.2f}; fpr {summary['fpr']:.2g}, worth {summary['validation_ok_effective']} uniform "
               f"draws, at most {summary['fpr_upper']:.2g} with {100 * (confidence or 0.95):g} % confidence"
               + (f", its false positives in runs of {runs:g} minutes" if runs else "")
               + (f", the spread between the {parts} "
                  + ("histories'" if parts == len(data) else f"parts' (--split-days {days:g})")
                  + " rates" if spread and parts > 1 else "")
               + (f": design effect {summary['fpr_design_effect']:g}" if runs or (spread and parts > 1) else "")
               + ")")
    if summary["budget_prior_node_days"]:
        typer.echo(f"false-alarm budget prior: {summary['budget_prior_node_days']:.1f} node-days of this history; "
                   "the worker's budget starts from it ('train threshold' on held-out days replaces it)")


@train_app.command("threshold")
def train_threshold(
    model: str = _opt(..., "--model", panel=COMMON, metavar="DIR", help="Model of 'train failure'."),
    data: List[str] = _opt(..., "--data", panel=COMMON, metavar="DIR", help="Held-out labelled history; repeat."),
    out: str = _opt(..., "--out", panel=COMMON, metavar="DIR", help="New model directory."),
    false_alarms: float = _opt(2.0, "--false-alarms", panel=CALIBRATION, min=0, metavar="N",
                               help="Per 100 node-days allowed."),
    sensor_map: Optional[str] = SENSOR_MAP,
    stride: int = STRIDE,
    as_json: bool = JSON,
) -> None:
    """Set the vote threshold for a false-alarm budget.

    The worker's online vote runs over every node of the histories; the lowest
    threshold whose false-alarm episodes per 100 node-days (and every higher
    one's) stay within the budget is kept, in a new model version.
    """
    from hpcguard.simulators.failure_report import online_sentence

    with _progress(as_json) as bar:
        summary = _run(ft.calibrate_threshold, model, data, out, false_alarms=false_alarms, sensor_map=sensor_map,
                       stride=stride, progress=_spinner(bar, "loading"), notify=_notify)
    if as_json:
        emit_json(summary)
        return
    chosen = summary["chosen"]
    typer.echo(f"wrote {out} ({summary['version']}): vote threshold {chosen['threshold']:.6g} (was "
               f"{summary['threshold_before']:.6g}) on {summary['node_days']:.1f} node-days of {len(data)} "
               f"histor{'y' if len(data) == 1 else 'ies'}")
    for label, c in (("before", summary["before"]), ("now", chosen)):
        typer.echo(online_sentence(f"  {label:6s}", c))


@evaluate_app.command("failure")
def evaluate_failure(
    model: str = _opt(..., "--model", panel=COMMON, metavar="DIR", help="Model of 'train failure'."),
    data: List[str] = _opt(..., "--data", panel=COMMON, metavar="DIR", help="Held-out history; repeat: pooled."),
    report: Optional[str] = _opt(None, "--report", panel=COMMON, metavar="DIR", help="Write report.md, JSON, PNGs."),
    sensor_map: Optional[str] = SENSOR_MAP,
    config: Optional[str] = CONFIG,
    as_json: bool = JSON,
    at_fpr: Optional[float] = _opt(None, "--at-fpr", panel=CALIBRATION, min=0, max=1, metavar="RATE",
                                   show_default="2e-4", help="Also the tpr at this fpr."),
    train_data: Optional[List[str]] = _opt(None, "--train-data", metavar="DIR", show_default="the model's",
                                           help="Baselines' data."),
    max_ok: int = _opt(50000, "--max-ok", min=100, metavar="N", help="Healthy events."),
    seed: int = SEED,
    online: bool = _opt(True, "--online/--no-online", panel=SCAN, metavar="", show_default="on",
                        help="As the worker."),
    stride: int = _opt(1, "--scan-stride", panel=SCAN, min=1, metavar="N", help="Every N-th step."),
    false_alarms: float = _opt(2.0, "--false-alarms", panel=SCAN, min=0, metavar="N",
                               help="Budget; 0: off."),
) -> None:
    """Report a model on held-out histories (Table 4.1, targets).

    Unanimous 1/2/4/6, LSTM vote, single network, baseline, random forest, the
    online scan and the prediction targets, each reached or not. Several --data:
    the pool's report first, then each history's. At length: docs/site-guide.md.
    """
    from hpcguard.models.failure.assessment import without_scans
    from hpcguard.simulators.failure_report import evaluate_failure_model, report_markdown

    settings = load_settings(config)  # [ldms] netdev_interfaces, [ipmi] input, worker.sensor_map
    with _progress(as_json) as bar:
        # the budget controller runs on the online scan beside the fixed threshold (issue 56)
        result = _run(evaluate_failure_model, model, data, report=report, sensor_map=sensor_map, settings=settings,
                      train_data=train_data, max_ok=max_ok, seed=seed, online=online, stride=stride, at_fpr=at_fpr,
                      false_alarms=false_alarms, progress=_spinner(bar, "loading the training data"),
                      notify=_notify)
    if as_json:
        emit_json(without_scans(result))
    else:
        typer.echo(report_markdown(result))


@evaluate_app.command("cross-profile")
def evaluate_cross_profile(
    out: str = _opt(..., "--out", panel=COMMON, metavar="DIR", help="Report directory."),
    profiles: str = _opt("classic,gradual,mixed", "--profiles", panel=COMMON, metavar="NAMES", help="Profiles."),
    features: str = _opt("trees", "--features", panel=COMMON, metavar="SET", help="Feature set."),
    nodes: int = _opt(64, "--nodes", panel=COMMON, min=2, metavar="N", help="Nodes per history."),
    hours: float = _opt(48.0, "--hours", panel=COMMON, metavar="H", help="Training hours."),
    test_hours: Optional[float] = _opt(None, "--test-hours", panel=COMMON, metavar="H", show_default="H",
                                       help="Test hours."),
    as_json: bool = JSON,
    target_fpr: Optional[str] = TARGET_FPR,
    fpr_confidence: Optional[float] = FPR_CONFIDENCE,
    calibration_ok: Optional[int] = CALIBRATION_OK,
    calibration_span: str = CALIBRATION_SPAN,
    persistence: Optional[int] = PERSISTENCE,
    held_out: bool = _opt(False, "--held-out/--no-held-out", panel=SWITCHES, metavar="", show_default="off"),
    pairs_too: bool = _opt(True, "--pairs/--no-pairs", panel=SWITCHES, metavar="", show_default="on"),
    fpr_history_spread: Optional[bool] = FPR_SPREAD,
    seed: int = _opt(1, "--seed", metavar="N", help="Tests: N+100..."),
    train_histories: int = _opt(1, "--train-histories", min=1, max=99, metavar="K", help="Per profile."),
    test_histories: int = _opt(1, "--test-histories", min=1, max=99, metavar="T", help="Per profile."),
    mtbf_hours: Optional[float] = _opt(None, "--mtbf-hours", metavar="H", show_default="profile's", help="MTBF."),
    cache: Optional[str] = _opt(None, "--cache", metavar="DIR", show_default="OUT/cache", help="Cache."),
    mc_splits: Optional[int] = MC_SPLITS,
    simulated_look_alikes: Optional[int] = LOOK_ALIKES,
    max_ok: int = _opt(50000, "--max-ok", min=100, metavar="N", help="Ok events."),
    stride: int = _opt(4, "--scan-stride", min=1, metavar="N", help="Every N-th step."),
) -> None:
    """Train on each simulated profile, test on each other.

    Per pair: tpr (all, precursor failures), fpr, ppv, UC(1024) per predictor row
    and the online scan. --held-out: each profile also tests a model of all the
    others. Options not given take train failure's setting.
    """
    from hpcguard.simulators.cross_profile import cross_markdown, run_cross_profile

    with _progress(as_json) as bar:
        result = _run(run_cross_profile, out, profiles, nodes=nodes, hours=hours, test_hours=test_hours, seed=seed,
                      train_histories=train_histories, test_histories=test_histories, mtbf_hours=mtbf_hours,
                      features=features, cache=cache, mc_splits=mc_splits, calibration_ok=calibration_ok,
                      target_fpr=target_fpr, fpr_confidence=fpr_confidence, persistence=persistence,
                      calibration_span=calibration_span, fpr_history_spread=fpr_history_spread,
                      simulated_look_alikes=simulated_look_alikes, max_ok=max_ok, stride=stride, held_out=held_out,
                      pairs_too=pairs_too, progress=_spinner(bar, "cross-profile"), notify=_notify)
    if as_json:
        emit_json(result)
    else:
        typer.echo(cross_markdown(result))
