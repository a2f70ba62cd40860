"""The cross-profile experiment: train on one simulated site profile, evaluate on another, for
every pair (and, held out, each profile as the test of a model trained on all the others):
``hpcguard evaluate cross-profile`` as a function (:func:`run_cross_profile`).

Histories and models are cached under the report directory (``cache``), keyed by their
parameters and the model code, so a rerun evaluates again without retraining.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

from hpcguard.jsonable import jsonable
from hpcguard.models.failure.assessment import without_scans
from hpcguard.models.failure.site_training import TrainingError, checked_setting, profile_names


def run_cross_profile(out: str, profiles: str = "classic,gradual,mixed", *, nodes: int = 64, hours: float = 48.0,
                      test_hours: Optional[float] = None, seed: int = 1, train_histories: int = 1,
                      test_histories: int = 1, mtbf_hours: Optional[float] = None, features: str = "trees",
                      cache: Optional[str] = None, mc_splits: Optional[int] = None,
                      calibration_ok: Optional[int] = None, target_fpr: str | float | None = None,
                      fpr_confidence: Optional[float] = None, persistence: Optional[int] = None,
                      calibration_span: Optional[str] = None, fpr_history_spread: Optional[bool] = None,
                      simulated_look_alikes: Optional[int] = None, max_ok: int = 50000, stride: int = 4,
                      held_out: bool = False, pairs_too: bool = True,
                      progress: Optional[Callable[[str], None]] = None,
                      notify: Optional[Callable[[str, str], None]] = None) -> dict:
    """Every (train, test) pair of ``profiles`` (and with ``held_out``, each profile against a model of
    all the others): tpr (all failures, precursor failures), fpr, ppv, UC(1024) per predictor row and
    the online scan.  Writes report.json, report.md, roc_lstm.png and uc_lstm.png to ``out``; returns
    the report.  Options left ``None`` take ``train failure``'s setting without its simulated prior
    (each profile's own histories are what a pair trains on).  Raises
    :class:`~hpcguard.models.failure.site_training.TrainingError` before anything is simulated when
    the options cannot make an experiment."""
    from hpcguard.connectors.model_store import code_digest, load_model, save_model
    from hpcguard.models.failure.assessment import evaluate_history, history_summary, pool_results
    from hpcguard.models.failure.evaluation import PREDICTION_TARGETS
    from hpcguard.models.features import history_steps_of
    from hpcguard.simulators import failure_training as ft
    from hpcguard.streams.predictors import EnsemblePredictor

    note = progress or (lambda m: None)
    # the setting train failure would use, without its simulated prior: each profile's own histories
    # are what a pair trains on (the trees also on the simulator's look-alikes, never its failures)
    setting = checked_setting(features, target_fpr=target_fpr, fpr_confidence=fpr_confidence,
                              calibration_ok=calibration_ok, persistence=persistence, mc_splits=mc_splits,
                              simulated_prior=0, simulated_look_alikes=simulated_look_alikes,
                              calibration_span=calibration_span, fpr_history_spread=fpr_history_spread)
    target_fpr, fpr_confidence, calibration_ok, persistence, mc_splits, look_k, span, spread, days = (
        setting[k] for k in ("target_fpr", "fpr_confidence", "calibration_ok", "persistence", "mc_splits",
                             "simulated_look_alikes", "calibration_span", "fpr_history_spread", "split_days"))
    try:
        names = profile_names(profiles)
    except ValueError:
        names = []
    if len(names) < 2:
        raise TrainingError(f"--profiles needs at least two distinct profiles, got {profiles!r}")
    if held_out and len(names) < 3:
        raise TrainingError("--held-out needs three profiles or more (with two, a held-out model is the other "
                            "profile's pair)")
    if not (pairs_too or held_out):
        raise TrainingError("--no-pairs leaves nothing to evaluate without --held-out")
    report_dir = Path(out)
    cache_dir = Path(cache) if cache else report_dir / "cache"
    t_hours = test_hours or hours
    mapping = ft.load_mapping(None)
    try:
        history = history_steps_of(features)
    except ValueError as exc:
        raise TrainingError(str(exc)) from exc
    # the code digest is part of the key: a model cached by another version of the features is not reused
    options = (f"{features}{history}-n{nodes}-h{hours:g}-s{seed}x{train_histories}-m{mtbf_hours}-mc{mc_splits}"
               f"-c{calibration_ok}{span[0]}-t{target_fpr}{f'k{fpr_confidence}' if fpr_confidence else ''}-p{persistence}"
               f"-l{look_k}{'-hs' if spread else ''}{f'-d{days:g}' if days else ''}-{code_digest()}")
    # (training label, its profiles, its test profiles, held out?) per model
    others = {p: [q for q in names if q != p] for p in names}
    trainings = ([(p, [p], names, False) for p in names] if pairs_too else []) + (
        [("+".join(others[p]), others[p], [p], True) for p in names] if held_out else [])
    test_seeds = [seed + 100 + j for j in range(test_histories)]
    pairs: list[dict] = []
    train_dirs, train_recs, test_recs = {}, {}, {}
    for p in names:
        note(f"{p}: simulating histories")
        train_dirs[p] = [ft.profile_data(cache_dir, p, nodes, hours, seed + k, mtbf_hours)
                         for k in range(train_histories)]
        test_dirs = [ft.profile_data(cache_dir, p, nodes, t_hours, s, mtbf_hours) for s in test_seeds]
        train_recs[p] = [ft.load_recorded(d, mapping=mapping) for d in train_dirs[p]]
        test_recs[p] = [ft.load_recorded(d, mapping=mapping) for d in test_dirs]
    look_alike_only = ft.prior_histories(ft.PRIOR_PROFILE, look_k, str(cache_dir), progress=note)
    for label, group, tests, held in trainings:
        dirs = [d for q in group for d in train_dirs[q]]
        recs = [rec for q in group for rec in train_recs[q]]
        model_dir = cache_dir / "models" / f"{label}-{options}"
        if not (model_dir / "manifest.json").is_file():
            note(f"{label}: training")
            ens, _, meta, _ = ft.train_model(dirs, mapping, features, seed, calibration_ok=calibration_ok,
                                             target_fpr=target_fpr, fpr_confidence=fpr_confidence,
                                             mc_splits=mc_splits, persistence=persistence, recs=recs,
                                             look_alike_only=tuple(look_alike_only), calibration_span=span,
                                             fpr_history_spread=spread, split_days=days,
                                             progress=lambda m, p=label: note(f"{p}: {m}"), notify=notify)
            meta["profile"] = label
            save_model(ens, model_dir, meta)
        ens, manifest = load_model(model_dir)
        predict = EnsemblePredictor(ens, ens.version, manifest).predict   # the worker's own call
        for p_test in tests:
            note(f"train {label} → test {p_test}")
            try:
                results = [evaluate_history(ens, manifest, rec, recs, seed, max_ok, True, stride, forest=False,
                                            keep_scan=len(test_seeds) > 1, predict=predict)
                           for rec in test_recs[p_test]]
                if len(results) == 1:
                    res = results[0]
                else:
                    res = pool_results(ens, results, PREDICTION_TARGETS["vote_fpr"])
                    res["histories"] = [history_summary(r, s) for s, r in zip(test_seeds, results)]
            except ValueError as exc:
                raise TrainingError(f"test profile {p_test}: {exc}") from exc
            res.update({"train_profile": label, "test_profile": p_test, "held_out": held,
                        "validation": {k: manifest["metrics"]["lstm"].get(k) for k in
                                       ("validation_failures", "validation_ok", "tpr", "tpr_ci95", "fpr")}})
            pairs.append(res)
    report_dir.mkdir(parents=True, exist_ok=True)
    cross_plots(report_dir, pairs)
    result = {"profiles": names, "features": features, "nodes": nodes, "train_hours": hours, "test_hours": t_hours,
              "train_histories": train_histories, "seed": seed, "test_seed": seed + 100, "test_seeds": test_seeds,
              "scan_stride_steps": stride, "setting": setting, "pairs": without_scans(pairs)}
    (report_dir / "report.json").write_text(json.dumps(jsonable(result), indent=2))
    (report_dir / "report.md").write_text(cross_markdown(result))
    return result


def cross_markdown(result: dict) -> str:
    """The cross-profile table: one line per (train, test, predictor row), then the online scan, then
    each pair against the cross-profile target."""
    from hpcguard.models.failure.evaluation import PREDICTION_TARGETS

    budget = PREDICTION_TARGETS["online_false_alarms_per_100_node_days"]
    k = result["train_histories"]
    seeds = f"seed {result['seed']}" if k == 1 else f"{k} histories, seeds {result['seed']}-{result['seed'] + k - 1}"
    t = result.get("test_seeds") or [result["test_seed"]]
    tests = f"seed {t[0]}" if len(t) == 1 else f"{len(t)} histories, seeds {t[0]}-{t[-1]}, pooled"
    lines = [f"Cross-profile evaluation: features `{result['features']}`, {result['nodes']} nodes × "
             f"{result['train_hours']:g} h training ({seeds}), {result['nodes']} × "
             f"{result['test_hours']:g} h test ({tests}).", "",
             "| train → test | predictor | tpr | tpr (precursor) | fpr | ppv | UC(1024) |", "|---|---|---|---|---|---|---|"]
    for p in result["pairs"]:
        for r in p["rows"]:
            lines.append(f"| {p['train_profile']} → {p['test_profile']} | {r['name']} | {r['tpr']:.3f} | "
                         f"{r['tpr_precursor']:.3f} | {r['fpr']:.2e} | {r['ppv']:.3f} | {r['uc_1024']:.3f} |")
    strided = ("" if result["scan_stride_steps"] == 1 else "; the worker judges every step, and a short false "
               "alarm can fall between these evaluations, so the false-alarm figures are lower bounds")
    lines += ["", f"Online scan (the worker's decision, every {result['scan_stride_steps']} step(s), persistence "
              f"{result['setting']['persistence']}{strided}):", "",
              "| train → test | failures (precursor) | warned ≥ 2 min | precursor warned ≥ 2 min | false-alarm "
              "episodes / 100 node-days | median lead (min) | LSTM threshold: validation failures, tpr 95 % CI | "
              f"precursor warned ≥ 2 min at ≤ {budget:g} false-alarm episodes / 100 node-days (hindsight) |",
              "|---|---|---|---|---|---|---|---|"]
    for p in result["pairs"]:
        o, v = p["online"], p["validation"]
        ci = v.get("tpr_ci95") or [float("nan")] * 2
        at = p.get("online_at_false_alarm_target")
        lines.append(f"| {p['train_profile']} → {p['test_profile']} | {o['failures']} ({o['precursor_failures']}) | "
                     f"{o['warned_2min_share']:.2f} | {o['precursor_warned_2min_share']:.2f} | "
                     f"{o['false_alarms_per_100_node_days']:.2f} | {_minutes(o['median_lead_minutes'])} | "
                     f"{v.get('validation_failures')}, {ci[0]:.2f}-{ci[1]:.2f} | "
                     f"{'none within it' if at is None else format(at['precursor_warned_2min_share'], '.2f')} |")
    # the cross-profile target: every pair's vote catches >= 0.5 of the precursor failures at fpr <= 2e-4
    bound, need = PREDICTION_TARGETS["vote_fpr"], PREDICTION_TARGETS["cross_profile_tpr_precursor"]
    lines += ["", f"Against the cross-profile target (LSTM vote tpr of precursor failures >= {need:g} at fpr <= "
              f"{bound:g}); \"at fpr {bound:g}\" puts the threshold at fpr {bound:g} of the test's healthy events, "
              "with hindsight; the last columns count the test's precursor failures whose family the training "
              "failures hold (a model learns a precursor from examples of it: where that share is below the "
              "target, the pair cannot be expected to meet it):", "",
              "| train → test | tpr (precursor), model threshold | fpr | met | tpr (precursor) at fpr "
              f"{bound:g} | precursor failures of families seen in training | families not seen |",
              "|---|---|---|---|---|---|---|"]
    met = {False: 0, True: 0}
    for p in result["pairs"]:
        vote = next(r for r in p["rows"] if r["name"] == "lstm-vote")
        ok = vote["fpr"] <= bound and vote["tpr_precursor"] >= need
        met[p.get("held_out", False)] += ok
        at = p.get("at_fpr", {}).get("lstm-vote", {}).get("precursor", {}).get("tpr", float("nan"))
        fam = p["families_seen"]   # None: the training failures name no family
        share = "n/a" if fam is None or fam["share"] is None else f"{fam['share']:.2f}"
        unseen = "n/a" if fam is None else ", ".join(f"{f} ({n})" for f, n in fam["unseen"].items()) or "none"
        lines.append(f"| {p['train_profile']} → {p['test_profile']} | {vote['tpr_precursor']:.3f} | "
                     f"{vote['fpr']:.2e} | {'yes' if ok else 'no'} | {at:.3f} | {share} | {unseen} |")
    held = sum(p.get("held_out", False) for p in result["pairs"])
    if len(result["pairs"]) > held:
        lines += ["", f"{met[False]} of {len(result['pairs']) - held} pairs meet it."]
    if held:
        lines += ["", f"{met[True]} of {held} held-out profiles meet it (each the test of a model trained on "
                  "every other profile's histories)."]
    return "\n".join(lines) + "\n"


def _minutes(value: float) -> str:
    """A lead in minutes for a table cell; ``n/a`` for NaN (no failure warned, or pooled histories)."""
    return "n/a" if value != value else f"{value:.1f}"


def cross_plots(out: Path, pairs: list[dict]) -> None:
    """ROC of the LSTM vote and UC(n) of its fpr, one curve per (train, test) pair: the colour
    names the test profile, the dash pattern the training profile (a 4 × 4 matrix stays legible)."""
    from hpcguard.simulators.failure_report import plot_roc, plot_uc

    profiles = list(dict.fromkeys([p["test_profile"] for p in pairs] + [p["train_profile"] for p in pairs]))
    dashes = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]
    curves = [(f"{p['train_profile']}→{p['test_profile']}", p["scores"]["labels"], p["scores"]["vote_probability"],
               {"color": f"C{profiles.index(p['test_profile']) % 10}",
                "ls": dashes[profiles.index(p["train_profile"]) % len(dashes)]}) for p in pairs]
    plot_roc(out / "roc_lstm.png", curves, "LSTM vote ROC, train profile → test profile", legend_size=6,
             figsize=(7, 5), mark_fpr=2e-4)
    plot_uc(out / "uc_lstm.png", [(f"{p['train_profile']}→{p['test_profile']}",
                                   next(r["fpr"] for r in p["rows"] if r["name"] == "lstm-vote")) for p in pairs],
            "UC(n) of the LSTM vote", legend_size=6, figsize=(7, 5))
