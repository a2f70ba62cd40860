"""The evaluation report of a failure ensemble on held-out histories: ``hpcguard evaluate
failure`` as a function (:func:`evaluate_failure_model`), its markdown (:func:`report_markdown`)
and its plots (ROC per network, UC(n), the online operating curve).

The figures come from :mod:`hpcguard.models.failure.assessment`; this module reads the
model and the directories, runs the worker's own predictor where a vote has no threshold,
and writes ``report.json``, ``report.md`` and the PNGs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from hpcguard.jsonable import jsonable
from hpcguard.models.failure.assessment import without_scans
from hpcguard.models.failure.site_training import TrainingError
from hpcguard.settings import Settings


def evaluate_failure_model(model: str, data_dirs: Sequence[str], *, report: Optional[str] = None,
                           sensor_map: Optional[str] = None, settings: Optional[Settings] = None,
                           train_data: Optional[Sequence[str]] = None, max_ok: int = 50000, seed: int = 0,
                           online: bool = True, stride: int = 1, at_fpr: Optional[float] = None,
                           false_alarms: Optional[float] = None, progress: Optional[Callable[[str], None]] = None,
                           notify: Optional[Callable[[str, str], None]] = None) -> dict:
    """``model`` on each of ``data_dirs`` (:func:`~hpcguard.models.failure.assessment.evaluate_history`),
    then, with several, on their pool: ``hpcguard evaluate failure``.  ``report``: a directory for
    report.json, report.md and the plots (the pool's there, each history's in a sub-directory).
    ``false_alarms``: the budget (episodes per 100 node-days; default the target's, 0: none) of the
    false-alarm budget controller run beside the fixed threshold (``budget`` in the result).
    Returns the result with its ``scores`` (:func:`~hpcguard.models.failure.assessment.without_scans`
    gives what ``--json`` prints); raises :class:`~hpcguard.models.failure.site_training.TrainingError`."""
    import torch

    from hpcguard.connectors.model_store import load_model
    from hpcguard.models.failure.assessment import evaluate_history, pool_results
    from hpcguard.models.failure.evaluation import PREDICTION_TARGETS
    from hpcguard.simulators import failure_training as ft
    from hpcguard.streams.predictors import EnsemblePredictor

    torch.set_num_threads(1)
    note, notify = progress or (lambda m: None), notify or ft.on_stderr
    data = list(data_dirs)
    at_fpr = PREDICTION_TARGETS["vote_fpr"] if at_fpr is None else at_fpr
    settings = settings or Settings.load()
    try:
        ensemble, manifest = load_model(model)
    except (FileNotFoundError, ValueError) as exc:
        raise TrainingError(str(exc)) from exc
    mapping = ft.load_mapping(sensor_map, settings)
    notes = []
    trained_with = manifest.get("metadata", {}).get("sensor_map_sha256")
    if trained_with and trained_with != mapping.digest:
        notes.append(f"sensor map differs from the model's (model {trained_with[:12]}, now {mapping.digest[:12]})")
        notify("warning", notes[-1])
    if manifest.get("metadata", {}).get("fpr_target_certified") is False:
        meta = manifest["metadata"]
        notes.append(f"the model's threshold does not certify fpr <= {meta.get('target_fpr')} with "
                     f"{meta.get('fpr_confidence')} confidence: its training history was too small to certify it, "
                     "so the strictest threshold was set (online, set one for a false-alarm budget: hpcguard train "
                     "threshold)")
        notify("warning", notes[-1])
    note("loading the training data")
    dirs = [d for d in (train_data or manifest.get("metadata", {}).get("data_dirs", [])) if Path(d).is_dir()]
    train_recs = [ft.load_recorded(d, ensemble.grid_s, mapping, settings) for d in dirs]
    if not dirs:
        notes.append("random-forest and baseline rows omitted: no training data directory available "
                     "(pass --train-data)")
    # a vote without a threshold is scanned through the worker's own predictor call
    predict = EnsemblePredictor(ensemble, ensemble.version, manifest).predict
    results = []
    for i, d in enumerate(data):
        note(f"loading {d}")
        rec = ft.load_recorded(d, ensemble.grid_s, mapping, settings)
        coverage = ft.coverage_summary([rec], "test data" if len(data) == 1 else f"test data {d}", notify=notify)
        try:
            result = evaluate_history(ensemble, manifest, rec, train_recs, seed, max_ok, online, stride, note=note,
                                      at_fpr=at_fpr, keep_scan=len(data) > 1, predict=predict,
                                      false_alarms=false_alarms)
        except ValueError as exc:
            raise TrainingError(f"{d}: {exc}") from exc
        result.update({"model": str(model), "data": str(d), "coverage": coverage["shares"],
                       "threshold_certified": manifest.get("metadata", {}).get("fpr_target_certified", True),
                       "coverage_warnings": coverage["warnings"], "notes": notes})
        if report:
            note("plots")
            write_report(Path(report) if len(data) == 1 else Path(report) / f"{i + 1}-{Path(d).name}",
                         ensemble, result, markdown(result))
        results.append(result)
    if len(results) == 1:
        return results[0]
    note("pooling the histories")
    pooled = pool_results(ensemble, results, at_fpr)
    result = {"model": str(model), "version": pooled.pop("version"), "features": pooled.pop("features"),
              "data": [str(d) for d in data], "pooled": pooled, "targets": pooled.pop("targets"),
              "histories": results, "notes": notes}
    if report:
        write_report(Path(report), ensemble, result, pooled_markdown(result), pooled)
    return result


def report_markdown(result: dict) -> str:
    """The markdown of :func:`evaluate_failure_model`'s result: one history's, or the pool's then each history's."""
    return pooled_markdown(result) if "pooled" in result else markdown(result)


def write_report(out: Path, ensemble, result: dict, text: str, figures: Optional[dict] = None) -> None:
    """report.json (``result`` without scores or scans), report.md and the plots of one evaluation
    (``figures``: the part of ``result`` that holds the scores and the online curve, if not itself)."""
    figures = result if figures is None else figures
    out.mkdir(parents=True, exist_ok=True)
    plots(out, ensemble, figures["scores"]["labels"], figures["scores"], figures["rows"])
    if "online_curve" in figures:
        plot_online_curve(out / "online_curve.png", figures["online_curve"], ensemble.threshold,
                          "Online operating curve")
    (out / "report.json").write_text(json.dumps(jsonable(without_scans(result)), indent=2))
    (out / "report.md").write_text(text)


def _rows_table(rows: list[dict]) -> list[str]:
    lines = ["| predictor | tpr | tpr (precursor) | ppv | fpr | UC(1024) | n@UC 5% | n@UC 30% | n@UC 50% |",
             "|---|---|---|---|---|---|---|---|---|"]
    return lines + [f"| {r['name']} | {r['tpr']:.4f} | {r['tpr_precursor']:.4f} | {r['ppv']:.4f} | {r['fpr']:.6f} | "
                    f"{r['uc_1024']:.4f} | {r['nodes_uc_5']} | {r['nodes_uc_30']} | {r['nodes_uc_50']} |" for r in rows]


def _targets_table(targets: list[dict]) -> list[str]:
    def interval(t: dict) -> str:
        ci = t.get("ci95")
        return f"{ci[0]:.3g}–{ci[1]:.3g}" if ci and all(x == x for x in ci) else "–"

    return ["| target | reached | 95 % interval | bound | met |", "|---|---|---|---|---|"] + [
        f"| {t['target']} | {t['value']:.4g} | {interval(t)} | {t['bound']} | {'yes' if t['met'] else 'no'} |"
        for t in targets]


def online_sentence(scope: str, o: dict) -> str:
    """An online summary's failures warned and false alarms, in words."""
    share, fa = o["precursor_warned_2min_ci95"], o["false_alarms_per_100_node_days_ci95"]
    return (f"{scope}: {o['warned_2min']}/{o['failures']} failures warned >= 2 min ahead "
            f"({o['precursor_warned_2min']}/{o['precursor_failures']} with a precursor, 95 %: "
            f"{share[0]:.0%}-{share[1]:.0%}), {o['false_alarm_episodes']} false-alarm episodes in "
            f"{o['node_days']:.1f} node-days = {o['false_alarms_per_100_node_days']:.2f} per 100 node-days "
            f"(95 %: {fa[0]:.2f}-{fa[1]:.2f})")


def budget_lines(b: dict) -> list[str]:
    """The false-alarm budget controller beside the fixed and the hindsight-best threshold, in markdown."""
    many = b.get("histories", 1) > 1
    lines = [f"False-alarm budget {b['budget']:g} episodes per 100 node-days: the budget controller "
             "(models/budget.py) set the vote threshold in event time from the labels resolved so far, from the "
             f"model's own; scored after the first {b['burn_in_hours']:g} h streamed"
             + (", each history its own controller and hindsight-best, added" if many else "") + ":", "",
             "| threshold | vote threshold | precursor failures warned >= 2 min | all failures warned >= 2 min "
             "| false-alarm episodes / 100 node-days |", "|---|---|---|---|---|"]
    for r in b["rows"]:
        if many:
            value = "per history"
        else:
            value = f"{r['threshold']:.6g}" + (f" (median; {r['threshold_range'][0]:.6g}-{r['threshold_range'][1]:.6g})"
                                               if r.get("threshold_range") else "")
        lines.append(f"| {r['name']} | {value} | {r['precursor_warned_2min']}/{r['precursor_failures']} "
                     f"({r['precursor_warned_2min_share']:.0%}) | {r['warned_2min']}/{r['failures']} | "
                     f"{r['false_alarm_episodes']} in {r['node_days']:.1f} node-days = "
                     f"{r['false_alarms_per_100_node_days']:.2f} |")
    if not any(r["name"] == "hindsight-best" for r in b["rows"]):
        lines += ["", "no fixed threshold keeps within the budget after the burn-in (hindsight-best: none)"]
    return lines


def pooled_markdown(result: dict) -> str:
    """The pooled report of several test histories (one history's report, on the pool), then each history's."""
    p = result["pooled"]
    pooled = {**p, "version": result["version"], "features": result["features"], "targets": result["targets"],
              "notes": result["notes"],
              "data": f"{len(result['histories'])} test histories, pooled: " + ", ".join(result["data"])}
    return markdown(pooled) + "\n" + "\n".join(markdown(h) for h in result["histories"])


def markdown(result: dict) -> str:
    """One history's report (or a pool's, as one): the rows, the online scan and its curve, the
    hindsight thresholds, the targets, the families, the false positives' runs and look-alikes."""
    from hpcguard.models.failure.evaluation import FALSE_POSITIVE_RUN_GAP_S

    lines = [f"# Failure prediction on {result['data']}", "",
             f"model {result['version']} (features {result['features']}); {result['failures']} failure events "
             f"({result['precursor_failures']} with a precursor), {result['ok_events']} ok events", ""]
    lines += _rows_table(result["rows"])
    if "online" in result:
        o = result["online"]
        lines += ["", online_sentence(f"Online (the worker's decision on every node's history, every "
                                      f"{o['stride_steps']} step(s))", o)
                  + ("" if o["median_lead_minutes"] != o["median_lead_minutes"]   # NaN: pooled, or none warned
                     else f", median lead {o['median_lead_minutes']:.1f} min")]
    if "online_curve" in result:
        at = result["online_at_false_alarm_target"]
        lines += ["", "Online operating curve (the vote threshold swept on this data, with hindsight; "
                  "online_curve.png with --report):", "",
                  "| vote threshold | precursor failures warned >= 2 min | false-alarm episodes / 100 node-days |",
                  "|---|---|---|"]
        lines += [f"| {c['threshold']:.6g} | {c['precursor_warned_2min_share']:.3f} | "
                  f"{c['false_alarms_per_100_node_days']:.2f} |" for c in result["online_curve"][::-1]]
        lines += ["", "At the false-alarm target: " + (
            f"threshold {at['threshold']:.6g} warns {at['precursor_warned_2min_share']:.3f} of the precursor "
            f"failures >= 2 min ahead at {at['false_alarms_per_100_node_days']:.2f} episodes per 100 node-days "
            "(hindsight; hpcguard train threshold sets it from a labelled history)" if at else
            "no threshold on the curve keeps within it (one episode on this data is "
            f"{100.0 / max(o['node_days'], 1e-9):.2f} per 100 node-days)")]
    if "budget" in result:
        lines += [""] + budget_lines(result["budget"])
    for name, at in result.get("at_fpr", {}).items():
        a, p = at["all"], at["precursor"]
        lines += ["", f"{name} with its threshold put at fpr {a['fpr_bound']:g} of these {a['ok']} healthy events "
                  f"(set with hindsight; {a['false_positives']} false positives): tpr {a['tpr']:.4f}, "
                  f"{p['tpr']:.4f} of the {p['failures']} failures with a precursor"]
    if result.get("targets"):
        lines += ["", "Against the prediction targets (the model's own threshold):", ""] + _targets_table(result["targets"])
        if result.get("threshold_certified") is False:
            lines.append("- the model's threshold is not certified: its training history could not bound the fpr target")
        if not result.get("precursor_known", True):
            lines.append("- the data does not say which failures had a precursor: every failure is counted as one")
    if result.get("by_family"):
        online = result.get("online", {}).get("by_family", {})
        lines += ["", "By failure family (events; online: failures of the whole history warned >= 2 min ahead):", "",
                  "| family | failures | LSTM vote | single 2-min network | online warned |", "|---|---|---|---|---|"]
        for f, c in result["by_family"].items():
            o = online.get(f)
            lines.append(f"| {f} | {c['failures']} | {c['lstm-vote']} | {c['single-network@2min']} | "
                         + (f"{o['caught']}/{o['failures']} |" if o else "– |"))
    fam = result.get("families_seen")
    if fam and fam["share"] is not None:
        # a model learns a precursor from examples of it: what it never saw bounds what it can catch
        lines += ["", f"Families the model was trained on ({', '.join(fam['trained']) or 'none'}) hold {fam['seen']} "
                  f"of the {fam['seen'] + sum(fam['unseen'].values())} precursor failures ({fam['share']:.0%}); "
                  "not seen in training: " + (", ".join(f"{f} ({n})" for f, n in fam["unseen"].items()) or "none")]
    fp = {r["name"]: r["fp"] for r in result.get("rows", [])}
    runs = {name: n for name, n in result.get("false_positive_runs", {}).items() if fp.get(name)}
    if runs:
        lines += ["", "False positives in runs (one node's within "
                  f"{FALSE_POSITIVE_RUN_GAP_S / 60:.0f} min of each other are one; an fpr resting on a few runs "
                  "moves far from one history to the next): "
                  + ", ".join(f"{name} {fp[name]} in {n}" for name, n in runs.items())]
    for name, kinds in result.get("false_positives_by_look_alike", {}).items():
        if kinds:
            lines += ["", f"False positives of {name} by the look-alike episode they lie in: "
                      + ", ".join(f"{k} {n}" for k, n in kinds.items())]
    if "coverage" in result:
        lines += ["", "Coverage: " + ", ".join(f"{k} {v:.0%}" for k, v in result["coverage"].items())]
        lines += [f"- warning: {w}" for w in result.get("coverage_warnings", [])]
    lines += [""] + [f"- {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"


def plot_roc(path: Path, curves: list[tuple[str, Any, Any, dict]], title: str, legend_size: int = 7,
             figsize: tuple[float, float] = (6, 4.5), mark_fpr: float | None = None) -> None:
    """One ROC plot (log fpr axis); ``curves`` are ``(label, labels, scores, matplotlib line keywords)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from hpcguard.models.metrics import roc

    fig, ax = plt.subplots(figsize=figsize)
    for label, y, score, style in curves:
        c = roc(y, score)
        ax.plot(np.maximum(c["fpr"], 1e-6), c["tpr"], label=f"{label} (AUC {c['auc']:.3f})", **style)
    if mark_fpr is not None:
        ax.axvline(mark_fpr, color="grey", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_uc(path: Path, series: list[tuple[str, float]], ylabel: str, title: str | None = None,
            legend_size: int = 7, figsize: tuple[float, float] = (6, 4.5), levels: tuple[float, ...] = ()) -> None:
    """UC(n) (Eq. 4.4) over job sizes 1..2^18 for each ``(label, fpr)``; NaN fprs are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from hpcguard.models.metrics import uc_probability

    n = 2 ** np.arange(0, 19)
    fig, ax = plt.subplots(figsize=figsize)
    for label, fpr in series:
        if fpr == fpr:
            ax.plot(n, uc_probability(fpr, n), marker=".", label=label)
    for level in levels:
        ax.axhline(level, color="grey", lw=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("nodes of the job")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_online_curve(path: Path, curve: list[dict], model_threshold: float, title: str) -> None:
    """Precursor failures warned >= 2 min ahead against false-alarm episodes per 100 node-days, the
    model's own threshold marked with the 95 % intervals of its two values and the targets' corner
    shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hpcguard.models.failure.evaluation import PREDICTION_TARGETS

    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.plot([c["false_alarms_per_100_node_days"] for c in curve], [c["precursor_warned_2min_share"] for c in curve],
            "o-", ms=3, label="vote threshold swept")
    own = min(curve, key=lambda c: abs(c["threshold"] - model_threshold))
    x, y = own["false_alarms_per_100_node_days"], own["precursor_warned_2min_share"]
    ax.plot(x, y, "r*", ms=12, label=f"the model's threshold {model_threshold:.4g}")
    fa_ci, share_ci = own.get("false_alarms_per_100_node_days_ci95"), own.get("precursor_warned_2min_ci95")
    if fa_ci and share_ci and all(v == v for v in (*fa_ci, *share_ci)):
        ax.errorbar(x, y, xerr=[[x - fa_ci[0]], [fa_ci[1] - x]], yerr=[[y - share_ci[0]], [share_ci[1] - y]],
                    fmt="none", ecolor="r", elinewidth=1, capsize=3, label="its 95 % intervals")
    fa, share = (PREDICTION_TARGETS["online_false_alarms_per_100_node_days"],
                 PREDICTION_TARGETS["online_precursor_warned_2min_share"])
    ax.fill_between([0, fa], share, 1.0, color="green", alpha=0.15, label="targets")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlim(left=0)
    ax.set_ylim(0, 1)
    ax.set_xlabel("false-alarm episodes per 100 node-days")
    ax.set_ylabel("precursor failures warned >= 2 min ahead")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plots(out: Path, ensemble, labels, scores, rows) -> None:
    """ROC per lead-time network (and the vote) and UC(n) of every row, into ``out``."""
    curves = [(f"{lead} min", labels, scores["network_probabilities"][:, i], {})
              for i, lead in enumerate(ensemble.leads)]
    curves.append(("LSTM vote", labels, scores["vote_probability"], {"color": "k", "ls": "--"}))
    plot_roc(out / "roc_networks.png", curves, "ROC per lead-time network")
    plot_uc(out / "uc_nodes.png", [(r["name"], r["fpr"]) for r in rows], "UC(n)",
            "Probability of an unnecessary checkpoint (Eq. 4.4)", levels=(0.05, 0.3, 0.5))
