"""Training the failure ensemble on a site's recorded directories: the files around
:mod:`hpcguard.models.failure.site_training`.

This module reads the directories (:func:`load_recorded`), simulates and caches the
borrowed prior histories (:func:`prior_histories`), writes the model directory and its
manifest, and calibrates a model's threshold for a false-alarm budget.  What ``hpcguard
train failure`` and ``hpcguard train threshold`` do, callable from a notebook::

    from hpcguard.simulators.failure_training import train_failure_model
    summary = train_failure_model(["site/2026-11"], "models/site", simulated_prior=0)

Errors a site must act on are :class:`~hpcguard.models.failure.site_training.TrainingError`;
warnings and notes go to ``notify(kind, message)`` (default: stderr), progress to
``progress(message)``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

from hpcguard.models.failure.site_training import (GRID_S, NO_PRECURSOR, Recorded, TrainingError, checked_setting,
                                                   model_version, prior_plan, profile_names, train_on_histories,
                                                   training_options)
from hpcguard.settings import Settings

# The simulated prior's histories: the shape whose gain docs/results.md measures.
PRIOR_NODES, PRIOR_HOURS, PRIOR_MTBF_HOURS = 48, 24.0, 8.0
PRIOR_PROFILE = "mixed"   # every precursor family and every look-alike kind
# below this many false-alarm episodes allowed on its data, 'train threshold' says how loosely it is set
THIN_CALIBRATION_EPISODES = 10

Notify = Callable[[str, str], None]


def on_stderr(kind: str, message: str) -> None:
    """The default ``notify``: ``kind: message`` on stderr."""
    print(f"{kind}: {message}", file=sys.stderr)


def _quiet(message: str) -> None:
    pass


def load_mapping(path: Optional[str], settings: Optional[Settings] = None):
    """The site's sensor mapping (``path``), else ``worker.sensor_map`` of ``settings`` (default: the
    environment's), else the installed default."""
    from hpcguard.connectors.mapping import SensorMapping

    path = path or (settings or Settings.load()).worker.sensor_map or None
    try:
        return SensorMapping.load(path)
    except (OSError, ValueError) as exc:
        raise TrainingError(f"cannot load sensor map {path or '(default)'}: {exc}") from exc


def load_recorded(data_dir: str, grid_s: float = GRID_S, mapping=None, settings: Optional[Settings] = None
                  ) -> Recorded:
    """Sensor grid, failures (with precursor flags), benign look-alikes and coverage of a directory;
    ``settings`` (``--config``; default: the environment's) gives the ``[ldms]`` and ``[ipmi]`` input."""
    import numpy as np

    from hpcguard.connectors.coverage import coverage_of_grid
    from hpcguard.connectors.recorded import load_anomalies, load_failures, load_sensor_grid

    d = Path(data_dir)
    if not d.is_dir():
        raise TrainingError(f"data directory not found: {d}")
    if not (d / "failures.csv").is_file():
        raise TrainingError(f"{d} has no failures.csv (ground-truth labels are needed to train or evaluate)")
    try:
        failures = load_failures(d)
    except ValueError as exc:
        raise TrainingError(f"cannot read the failure labels: {exc}") from exc
    try:
        grid = load_sensor_grid(str(d), grid_s=grid_s, mapping=mapping, settings=settings)
        anomalies = load_anomalies(d) if (d / "anomalies.csv").is_file() else None
    except (ValueError, OSError) as exc:
        raise TrainingError(f"cannot load recorded telemetry from {d}: {exc}") from exc
    index = {name: i for i, name in enumerate(grid.nodes)}
    unknown = sorted({str(n) for n in failures["node"] if n not in index})
    if unknown:
        raise TrainingError(f"{d}/failures.csv names nodes without telemetry: {', '.join(unknown[:5])}")
    fnodes = np.array([index[n] for n in failures["node"]], dtype=int)
    ftimes = failures["time"].astype(float)
    family = [str(f) for f in failures["family"]]
    # labels that name no family say nothing of precursors: every failure then counts as having one
    precursor = np.array([f not in NO_PRECURSOR for f in family], bool) if any(family) else None
    look, kinds = None, None
    if anomalies is not None:
        benign = anomalies[~anomalies["leads_to_failure"] & np.isin(anomalies["node"], list(index))]
        look = (np.array([index[n] for n in benign["node"]], int), benign["start"], benign["end"])
        kinds = [str(k) for k in benign["kind"]]
    coverage = getattr(grid, "coverage", None) or coverage_of_grid(grid.nodes, grid.values)
    return Recorded(grid.values, float(grid.t0), fnodes, ftimes, list(grid.nodes), precursor, look, coverage,
                    family, kinds)


def save_recorded(rec: Recorded, path: Path) -> None:
    """A loaded history as one ``.npz`` (no pickles): grid, labels, look-alikes."""
    import numpy as np

    look = rec.look_alikes if rec.look_alikes is not None else (np.zeros(0, int), np.zeros(0), np.zeros(0))
    np.savez_compressed(path, values=rec.values.astype(np.float32), t0=rec.t0, failure_nodes=rec.failure_nodes,
                        failure_times=rec.failure_times, nodes=np.array(rec.nodes, dtype=str),
                        precursor=np.asarray(rec.precursor if rec.precursor is not None else [], bool),
                        look_nodes=look[0], look_starts=look[1],
                        look_ends=look[2], family=np.array(rec.family if rec.family is not None else [], dtype=str),
                        look_kinds=np.array(rec.look_alike_kinds if rec.look_alike_kinds is not None else [],
                                            dtype=str))


def read_recorded(path: Path) -> Recorded:
    """:func:`save_recorded`'s file back as a :class:`Recorded` (grid as float64, as loaded)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        return Recorded(z["values"].astype(float), float(z["t0"]), z["failure_nodes"], z["failure_times"],
                        z["nodes"].tolist(), z["precursor"] if z["precursor"].size == z["failure_times"].size else None,
                        (z["look_nodes"], z["look_starts"], z["look_ends"]),
                        None, z["family"].tolist() or None, z["look_kinds"].tolist() or None)


def coverage_summary(recs: Sequence[Recorded], label: str, threshold: float = 0.5,
                     notify: Optional[Notify] = None) -> dict:
    """Per-sensor share of node-steps with a value over ``recs`` and the warnings below ``threshold``
    (each also given to ``notify``)."""
    from hpcguard.connectors.coverage import SensorCoverage

    total = SensorCoverage()
    for r in recs:
        total.merge(r.coverage)
    report = total.report()
    warnings = total.warnings(threshold=threshold)
    for w in warnings:
        (notify or on_stderr)("warning", f"{label}: coverage {w}")
    shares = {k: v["share"] for k, v in report["sensors"].items()}
    return {"shares": shares, "warnings": warnings, "report": report}


def profile_data(cache: Path, profile: str, nodes: int, hours: float, seed: int,
                 mtbf_hours: Optional[float] = None) -> str:
    """A simulated recorded-data directory of ``profile``, generated once and cached (no 1 s IO
    file: the failure ensemble does not read it, and it is most of the writing time)."""
    from hpcguard.simulators.telemetry import simulate_telemetry

    extra = {} if mtbf_hours is None else {"mtbf_hours": mtbf_hours}
    d = cache / "data" / (f"{profile}-n{nodes}-h{hours:g}-s{seed}" + (f"-m{mtbf_hours:g}" if extra else "")
                          + "-noio")
    if not (d / "meta.json").is_file():
        try:
            simulate_telemetry(str(d), nodes=nodes, hours=hours, seed=seed, profile=profile, io=False, **extra)
        except (TypeError, ValueError) as exc:
            raise TrainingError(f"cannot simulate profile {profile!r}: {exc}") from exc
    return str(d)


def prior_histories(profiles: str, histories: int, cache: Optional[str], progress=None
                    ) -> list[tuple[Path, Recorded]]:
    """``histories`` simulated histories of ``profiles`` (:func:`prior_plan`) as ``(file, Recorded)``.

    Each is simulated once, read with the packaged mapping (the simulator's BMC names) and kept
    as a compact ``.npz`` of its canonical grid and labels (about 6 MB, against 250 MB of raw
    files) under ``cache_root(cache)/simulated-prior/<profile>-...``, keyed by the model code's
    digest so a simulator change regenerates it.
    """
    import tempfile
    import zipfile

    from hpcguard.connectors.mapping import SensorMapping
    from hpcguard.connectors.model_store import cache_root, code_digest

    if not histories:
        return []
    try:
        plan = prior_plan(profiles, histories)
    except ValueError as exc:
        raise TrainingError(f"--prior-profile: {exc}") from exc
    out = []
    for profile, seed in plan:
        root = (cache_root(cache) / "simulated-prior"
                / f"{profile}-n{PRIOR_NODES}-h{PRIOR_HOURS:g}-m{PRIOR_MTBF_HOURS:g}-{code_digest()}")
        f = root / f"s{seed}.npz"
        try:
            out.append((f, read_recorded(f)))
            continue
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            pass   # not there yet, or damaged (disk full, a killed copy): simulate it (again)
        (progress or _quiet)(f"simulating prior history {len(out) + 1}/{histories} ({profile}, seed {seed})")
        try:
            root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=root) as tmp:
                raw = profile_data(Path(tmp), profile, PRIOR_NODES, PRIOR_HOURS, seed, PRIOR_MTBF_HOURS)
                save_recorded(load_recorded(raw, mapping=SensorMapping.load(None)), Path(tmp) / "rec.npz")
                Path(tmp, "rec.npz").replace(f)   # atomic: a concurrent run sees a whole file or none
        except OSError as exc:
            raise TrainingError(f"cannot cache the simulated prior under {root}: {exc} (choose a writable "
                                f"--cache-dir or $HPCGUARD_CACHE_DIR)") from exc
        out.append((f, read_recorded(f)))   # as every later run reads it (float32 grid): reruns train alike
    return out


def train_model(data: list[str], mapping, features: str, seed: int = 0, ok_ratio: float = 10.0,
                calibration_ok: int = 20000, target_fpr: Optional[float] = None, mc_splits: int = 3,
                persistence: int = 1, allow_missing: tuple[str, ...] = (), hard_negatives: bool = True,
                progress=None, recs: Optional[list[Recorded]] = None, positive_shifts: int = 0,
                prior: tuple[tuple[Path, Recorded], ...] = (), lead_shift: bool = True,
                fpr_confidence: Optional[float] = None,
                look_alike_only: tuple[tuple[Path, Recorded], ...] = (), calibration_span: str = "validation",
                fpr_run_minutes: float = 0, fpr_history_spread: bool = False, split_days: float = 0,
                settings: Optional[Settings] = None, notify: Optional[Notify] = None):
    """Train an ensemble on recorded directories (:func:`~hpcguard.models.failure.site_training.
    train_on_histories` on them, ``recs`` when already loaded); returns ``(ensemble, report, metadata,
    coverage)``.  Coverage and the missing-sensor check come from ``data`` alone (not the ``prior``);
    the metadata digests the data, the prior's files, the mapping and the model code into the version.
    """
    import hashlib

    import torch

    from hpcguard import __version__
    from hpcguard.connectors import model_store

    from hpcguard.models.features import LEARNED_FEATURE_SETS, feature_set

    torch.set_num_threads(1)
    if features not in LEARNED_FEATURE_SETS:   # before any history is loaded
        try:
            feature_set(features)
        except ValueError as exc:
            raise TrainingError(str(exc)) from exc
    note = progress or _quiet
    if recs is None:
        recs = []
        for d in data:
            note(f"loading {d}")
            recs.append(load_recorded(d, mapping=mapping, settings=settings))
    coverage = coverage_summary(recs, "training data", notify=notify)
    # a sensor with no value at all would be imputed from nothing: refuse unless the site says so
    missing = sorted(s for s, share in coverage["shares"].items() if not share and s not in allow_missing)
    if missing:
        raise TrainingError(f"sensor(s) {', '.join(missing)} have no value in the training data: check --sensor-map "
                            "(coverage report above), or pass --allow-missing NAME to train without them (their "
                            "features then carry no information: paper features are filled with 0, site features "
                            "are 0 with the missing mask 1)")
    absent = [s for s, share in coverage["shares"].items() if not share]
    trained = train_on_histories(data, recs, features, seed=seed, ok_ratio=ok_ratio, calibration_ok=calibration_ok,
                                 target_fpr=target_fpr, mc_splits=mc_splits, persistence=persistence,
                                 hard_negatives=hard_negatives, positive_shifts=positive_shifts, prior=prior,
                                 lead_shift=lead_shift, fpr_confidence=fpr_confidence,
                                 look_alike_only=look_alike_only, calibration_span=calibration_span,
                                 fpr_run_minutes=fpr_run_minutes, fpr_history_spread=fpr_history_spread,
                                 split_days=split_days, absent=absent, progress=note)
    ensemble, report = trained.ensemble, trained.report
    prior_files, look_files = [f for f, _ in prior], [f for f, _ in look_alike_only]
    digest = model_store.digest_dirs(data)
    if prior_files or look_files:
        digest = hashlib.sha256(f"{digest}|{model_store.digest_files(prior_files)}|"
                                f"{model_store.digest_files(look_files)}".encode()).hexdigest()
    model_code = model_store.code_digest()   # looked up when called: a test gives it other code
    options = training_options(trained, seed, ok_ratio, calibration_ok, calibration_span, target_fpr, mc_splits,
                               persistence, lead_shift, positive_shifts, fpr_confidence, fpr_run_minutes,
                               fpr_history_spread, split_days, len(data), hard_negatives, allow_missing)
    ensemble.version = model_version(trained.features, seed, digest, mapping.digest, model_code, options)
    lstm = {k: report["voter"][k] for k in ("threshold", "tpr", "fpr", "auc", "validation_failures",
                                             "validation_ok", "validation_ok_effective", "tpr_ci95", "fpr_ci95",
                                             "fpr_upper", "fpr_design_effect", "split")}
    metrics = {"lstm": lstm, "networks": [{k: r[k] for k in ("lead_minutes", "cv_tpr", "cv_fpr", "val_loss")}
                                          for r in report["networks"]], "training": report}
    encoder = trained.encoder
    meta = {"hpcguard_version": __version__, "data_dirs": [str(Path(d).resolve()) for d in data],
            "simulated_prior_files": [str(f.resolve()) for f in prior_files],
            "simulated_look_alike_files": [str(f.resolve()) for f in look_files],
            "training_data_sha256": digest, "sensor_map_sha256": mapping.digest, "model_code": model_code,
            **options, "coverage": coverage["shares"], "coverage_warnings": coverage["warnings"],
            "missing_sensors": absent, "hard_negatives": trained.hard_negatives, "families": trained.families,
            **({"encoder": {k: v for k, v in encoder.items() if k != "loss"}} if encoder else {}),
            "events": report["events"], "failures": report["failures"], "metrics": metrics}
    return ensemble, report, meta, coverage


def train_failure_model(data_dirs: Sequence[str], out: str, *, sensor_map: Optional[str] = None,
                        settings: Optional[Settings] = None, features: str = "trees", seed: int = 0,
                        ok_ratio: float = 10.0, calibration_ok: Optional[int] = None,
                        target_fpr: str | float | None = None, fpr_confidence: Optional[float] = None,
                        fpr_run_minutes: Optional[float] = None, fpr_history_spread: Optional[bool] = None,
                        calibration_span: Optional[str] = None, split_days: Optional[float] = None,
                        mc_splits: Optional[int] = None, persistence: Optional[int] = None, lead_shift: bool = True,
                        allow_missing: Sequence[str] = (), hard_negatives: bool = True, positive_shifts: int = 0,
                        simulated_prior: Optional[int] = None, simulated_look_alikes: Optional[int] = None,
                        prior_profile: str = PRIOR_PROFILE, cache_dir: Optional[str] = None,
                        progress: Optional[Callable[[str], None]] = None, notify: Optional[Notify] = None) -> dict:
    """Train the six lead-time networks and the LSTM voter on ``data_dirs`` and write the model to
    ``out``: ``hpcguard train failure``.  Options left ``None`` take the feature set's setting
    (:func:`~hpcguard.models.failure.site_training.training_setting`).  Returns the summary the
    command prints with ``--json``, plus ``metadata`` (the manifest's); its ``notes`` say what the
    data could not give (each also given to ``notify``)."""
    from hpcguard.connectors.model_store import save_model
    from hpcguard.models.failure.site_training import CONV_MIN_FAILURES

    notify = notify or on_stderr
    setting = checked_setting(features, target_fpr=target_fpr, fpr_confidence=fpr_confidence,
                              calibration_ok=calibration_ok, persistence=persistence, mc_splits=mc_splits,
                              simulated_prior=simulated_prior, simulated_look_alikes=simulated_look_alikes,
                              calibration_span=calibration_span, fpr_run_minutes=fpr_run_minutes,
                              fpr_history_spread=fpr_history_spread, split_days=split_days)
    if not hard_negatives:   # no look-alike is a healthy example, the simulator's included
        if simulated_look_alikes:
            raise TrainingError("--simulated-look-alikes adds look-alikes as healthy examples: not with "
                                "--no-hard-negatives")
        setting["simulated_look_alikes"] = 0
    (target_fpr, fpr_confidence, calibration_ok, persistence, mc_splits, prior_k, look_k, span, runs,
     spread, days) = (setting[k] for k in ("target_fpr", "fpr_confidence", "calibration_ok", "persistence",
                                           "mc_splits", "simulated_prior", "simulated_look_alikes",
                                           "calibration_span", "fpr_run_minutes", "fpr_history_spread",
                                           "split_days"))
    settings = settings or Settings.load()
    mapping = load_mapping(sensor_map, settings)
    note = progress or _quiet
    note("loading telemetry")
    # the look-alike-only histories follow the prior's (its seeds 1..K, theirs K+1..K+L)
    simulated = prior_histories(prior_profile, prior_k + look_k, cache_dir, progress=note)
    prior, look_alike_only = simulated[:prior_k], simulated[prior_k:]
    data = list(data_dirs)
    recs = []
    for d in data:  # loaded here: the budget prior below scans them too
        note(f"loading {d}")
        recs.append(load_recorded(d, mapping=mapping, settings=settings))
    ensemble, report, meta, coverage = train_model(
        data, mapping, features, seed, ok_ratio, calibration_ok, target_fpr, mc_splits, persistence,
        tuple(allow_missing or ()), hard_negatives, progress=note, recs=recs, positive_shifts=positive_shifts,
        prior=tuple(prior),
        lead_shift=lead_shift, fpr_confidence=fpr_confidence, look_alike_only=tuple(look_alike_only),
        calibration_span=span, fpr_run_minutes=runs, fpr_history_spread=spread, split_days=days, settings=settings,
        notify=notify)
    shape = {"profile": ",".join(profile_names(prior_profile)), "nodes": PRIOR_NODES, "hours": PRIOR_HOURS,
             "mtbf_hours": PRIOR_MTBF_HOURS}
    meta["simulated_prior"] = {**shape, "histories": prior_k} if prior else None
    meta["simulated_look_alikes"] = ({**shape, "histories": look_k} if look_alike_only else None)
    site_map = sensor_map or settings.worker.sensor_map
    meta["sensor_map"] = str(Path(site_map).resolve()) if site_map else "default"
    # the threshold's fpr bound holds only when the calibration events could certify the target: say so in the
    # manifest, so evaluate failure and an operator see it (the threshold is then the strictest one)
    certified = fpr_confidence is None or target_fpr is None or bool(report["voter"]["target_met"])
    if not certified:
        meta["fpr_target_certified"] = False
    if ensemble.vote == "lstm" and settings.worker.false_alarms > 0:
        # the worker's budget controller starts from the site's own labelled history (no warm-up on the model's
        # threshold); 'train threshold' replaces it with its held-out history's; no budget, no prior to scan for
        loaded = recs if ensemble.grid_s == GRID_S else None  # as trained on (not read twice)
        meta["budget_prior"] = history_prior(ensemble, data, mapping, settings.worker.false_alarms,
                                             settings=settings, progress=note, recs=loaded)
    note("writing model")
    try:
        save_model(ensemble, out, meta)
    except OSError as exc:
        raise TrainingError(f"cannot write model to {out}: {exc}") from exc
    lstm = meta["metrics"]["lstm"]
    summary = {"model": str(out), "version": ensemble.version, "features": meta["features"],
               "setting": {**setting, "defaults": "paper" if features == "paper" else "site"},
               "history_steps": ensemble.history_steps, "events": report["events"], "failures": report["failures"],
               "hard_negatives": meta["hard_negatives"], "lstm_threshold": ensemble.threshold, **lstm,
               "sensor_map_sha256": meta["sensor_map_sha256"], "simulated_prior": meta["simulated_prior"],
               "simulated_look_alikes": meta["simulated_look_alikes"],
               "coverage": coverage["shares"],
               "coverage_warnings": coverage["warnings"], "networks": meta["metrics"]["networks"],
               "lead_calibration": report.get("lead_calibration"),
               "budget_prior_node_days": (meta.get("budget_prior") or {}).get("node_days"), "notes": []}

    def note_that(message: str) -> None:
        summary["notes"].append(message)
        notify("note", message)

    if not meta["hard_negatives"]:
        # measured: the look-alike labels lift the far tail (docs/results.md, "Hard negatives the model finds")
        note_that("no hard negatives: the training data has no labelled benign look-alikes (anomalies.csv, or "
                  "--no-hard-negatives); --simulated-prior K adds the simulator's")
    if "encoder" in meta:
        summary["encoder"] = meta["encoder"]
        if meta["features"] == "conv" and meta["encoder"]["failures"] < CONV_MIN_FAILURES:
            # measured: with three histories (~400 failures) it trails the robust set (docs/results.md)
            note_that(f"the conv encoder was fitted on {meta['encoder']['failures']} failures; it needs about "
                      f"{CONV_MIN_FAILURES} or more to beat --features robust (--simulated-prior 24 brings about "
                      "3,000)")
    if not certified:
        note_that(uncertified_advice(lstm["validation_ok_effective"], target_fpr, fpr_confidence, lstm["fpr"],
                                     lstm["fpr_upper"], calibration_ok, span))
    if spread and fpr_confidence is not None and target_fpr is not None and meta.get("own_parts", len(data)) == 1:
        # measured: a threshold kept on one history's rate, the next histories' rates 1.4-2.9 times it
        # (docs/results.md, "One own history: the rate's spread it cannot see")
        note_that("one own history: the fpr bound counts the draws within it, not how the rate differs from one "
                  "history of the site to the next; train on two or more --data histories (or --split-days 1 on "
                  "one of two days or more) and the bound counts their spread")
    summary["metadata"] = {k: v for k, v in meta.items() if k != "metrics"}
    return summary


def uncertified_advice(have: int, target_fpr: float, confidence: float, fpr: float, fpr_upper: float,
                       calibration_ok: int, span: str) -> str:
    """What to say when ``have`` healthy calibration events cannot keep fpr <= ``target_fpr`` with ``confidence``:
    advice names only what would change the outcome (a larger ``--calibration-ok`` only while the one in use is
    below what the target needs; else more history, or the whole history as the calibration span).

    >>> uncertified_advice(750, 2e-4, 0.95, 0.0, 4e-3, 1500, "validation").endswith(
    ...     "--calibration-ok 300000 with enough history lets it")
    True
    >>> "--calibration-ok" in uncertified_advice(8756, 2e-4, 0.95, 0.0, 3.4e-4, 300000, "validation")
    False
    """
    # zero false positives among n healthy events still leave a rate up to about 3/n plausible (weighted draws: 60/n)
    needed = round(60 / target_fpr)
    said = (f"{have} healthy calibration events cannot keep fpr <= {target_fpr:g} with {confidence:g} confidence: "
            f"the threshold is the strictest one (fpr {fpr:.2g}, at most {fpr_upper:.2g}) and the model's manifest "
            "says the target is not certified; ")
    if calibration_ok < needed:
        return said + f"--calibration-ok {needed} with enough history lets it"
    more = "" if span == "history" else ", or --calibration-span history (every hour of the history, not only " \
                                        "the validation period)"
    return (said + f"the history itself is too short: about {needed} healthy events are needed; train on more "
            f"history{more}, or set the threshold for a false-alarm budget with 'hpcguard train threshold'")


def budget_prior(scans: Sequence[tuple], false_alarms: float, threshold: float, step_s: float) -> dict:
    """The false-alarm budget controller's prior (:meth:`~hpcguard.models.budget.BudgetController.prior`):
    every node-step of the calibration histories ``(rec, vote scan, ...)`` learnt with its failures.
    The worker starts its controller from it (``streams.decisions.budget_for``), so the threshold fits
    the site from the first streamed step instead of the model's own for a warm-up."""
    from hpcguard.models.budget import BudgetController

    c = BudgetController(false_alarms if false_alarms > 0 else 2.0, initial=threshold, step_s=step_s)
    for rec, votes, *_ in scans:
        c.learn_history(votes["vote"], votes["window_end_time"], rec.failure_nodes, rec.failure_times, nodes=rec.nodes)
    return c.prior()


def history_prior(ensemble, data_dirs: Sequence[str], mapping, false_alarms: float, stride: int = 1,
                  settings: Optional[Settings] = None, progress: Optional[Callable[[str], None]] = None,
                  recs: Optional[Sequence[Recorded]] = None) -> dict:
    """:func:`budget_prior` of ``ensemble``'s online vote on the labelled histories ``data_dirs``
    (``recs``: the same histories already loaded on the ensemble's grid, one per directory)."""
    from hpcguard.models.failure.evaluation import online_vote_scan

    if recs is not None and len(recs) != len(data_dirs):
        raise ValueError(f"{len(recs)} loaded histories for {len(data_dirs)} directories")
    scans = []
    for i, d in enumerate(data_dirs):
        (progress or _quiet)(f"budget prior: online vote on {d}")
        rec = recs[i] if recs is not None else load_recorded(d, ensemble.grid_s, mapping, settings=settings)
        scans.append((rec, online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s,
                                            ensemble.history_steps, stride=stride)))
    return budget_prior(scans, false_alarms, float(ensemble.threshold), ensemble.grid_s * stride)


def calibrate_threshold(model: str, data_dirs: Sequence[str], out: str, false_alarms: float = 2.0,
                        sensor_map: Optional[str] = None, stride: int = 1,
                        progress: Optional[Callable[[str], None]] = None, notify: Optional[Notify] = None) -> dict:
    """Set the LSTM vote threshold of ``model`` for ``false_alarms`` episodes per 100 node-days of the
    worker's own online vote on ``data_dirs`` and write the calibrated model (its own version) to
    ``out``: ``hpcguard train threshold``.  Returns the chosen point, the point before, the whole
    operating curve and notes on how loosely the data sets it."""
    import hashlib

    import numpy as np
    import torch

    from hpcguard.connectors.model_store import digest_dirs, load_model, save_model
    from hpcguard.models.failure.assessment import operating_curve
    from hpcguard.models.failure.dataset import healthy_mask
    from hpcguard.models.failure.evaluation import online_vote_scan, threshold_for_false_alarms

    torch.set_num_threads(1)
    notify, note = notify or on_stderr, progress or _quiet
    data = list(data_dirs)
    if Path(out).resolve() == Path(model).resolve():
        raise TrainingError("--out must be a new directory: the calibrated model is a model of its own version")
    try:
        ensemble, manifest = load_model(model)
    except (FileNotFoundError, ValueError) as exc:
        raise TrainingError(str(exc)) from exc
    if ensemble.vote != "lstm":
        raise TrainingError(f"{model} votes {ensemble.vote_name}: only the LSTM vote has a threshold to set")
    mapping = load_mapping(sensor_map)
    scans = []
    for d in data:
        note(f"online vote on {d}")
        rec = load_recorded(d, ensemble.grid_s, mapping)
        if not len(rec.failure_times):
            notify("note", f"{d} has no failure: it counts for the false alarms only")
        votes = online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s,
                                 ensemble.history_steps, stride=stride)
        healthy = healthy_mask(rec.values.shape[0], rec.values.shape[1], rec.t0, ensemble.grid_s,
                               rec.failure_nodes, rec.failure_times)
        pre = rec.precursor if rec.precursor is not None else np.ones(len(rec.failure_times), bool)
        scans.append((rec, votes, healthy, pre))
    note("operating curve")
    try:
        curve = operating_curve(ensemble, scans, points=60)
    except ValueError as exc:
        raise TrainingError(f"{', '.join(data)}: {exc}") from exc
    node_days = curve[0]["node_days"]
    one_episode = 100.0 / node_days
    chosen = threshold_for_false_alarms(curve, false_alarms)
    if chosen is None:
        raise TrainingError(f"no vote threshold keeps within {false_alarms:g} false-alarm episodes per 100 node-days "
                            f"on these {node_days:.1f} node-days (one episode is {one_episode:.2f}; even above every "
                            f"healthy vote {curve[-1]['false_alarm_episodes']} remain, raised outside healthy "
                            "operation, e.g. just after a failure): give more history or a larger --false-alarms")
    own = next(c for c in curve if c["threshold"] == ensemble.threshold)
    notes = []
    if false_alarms < one_episode:
        notes.append(f"on {node_days:.1f} node-days one false-alarm episode is already {one_episode:.2f} per 100 "
                     f"node-days: the budget allows none here, so the threshold is set above every false alarm "
                     "seen; more history sets it closer")
    elif (allowed := false_alarms * node_days / 100.0) < THIN_CALIBRATION_EPISODES:
        low, high = chosen["false_alarms_per_100_node_days_ci95"]
        notes.append(f"the budget allows {allowed:.1f} false-alarm episodes on these "
                     f"{node_days:.1f} node-days: the threshold rests on {chosen['false_alarm_episodes']}, and the "
                     f"site's rate at it may lie anywhere in {low:.2f}-{high:.2f} per 100 node-days (95 %); "
                     f"about {100.0 * THIN_CALIBRATION_EPISODES / max(false_alarms, 1e-9):.0f} node-days of "
                     f"calibration history let the budget count {THIN_CALIBRATION_EPISODES} episodes")
    for n in notes:
        notify("note", n)
    digest = digest_dirs(data)
    calibration = {"data_dirs": [str(Path(d).resolve()) for d in data], "data_sha256": digest,
                   "false_alarms_per_100_node_days_budget": false_alarms, "stride_steps": stride,
                   "node_days": node_days, "threshold_before": ensemble.threshold, "before": own, "chosen": chosen,
                   "calibrated_from": ensemble.version}
    tag = hashlib.sha256(f"{ensemble.version}|{digest}|{false_alarms!r}|{stride}".encode()).hexdigest()[:8]
    before = ensemble.threshold
    ensemble.threshold = chosen["threshold"]
    if ensemble.lead_calibration is not None:
        # the lead a warning reports, measured again at the new threshold: every failure of the calibration data
        from hpcguard.models.failure.ensemble import calibrate_leads
        from hpcguard.models.failure.site_training import warned_leads
        keys, minutes = [], []
        for rec, *_ in scans:
            k, m = warned_leads(ensemble, [rec])
            keys, minutes = keys + k.tolist(), minutes + m.tolist()
        table = calibrate_leads(keys, minutes)
        if table is not None:
            ensemble.lead_calibration = table
        calibration["lead_calibration"] = {**(table or {"failures": 0}),
                                           "source": "first online warning within 15 min before each failure of "
                                                     "the calibration data" if table else
                                           f"{len(minutes)} warned failures bound no lead: the model's table kept"}
    ensemble.version = f"{ensemble.version}-fa{tag}"
    meta = dict(manifest.get("metadata", {}))
    # the worker's budget controller starts from this history's labelled node-steps (no warm-up on a new site)
    note("budget controller prior")
    meta["budget_prior"] = budget_prior(scans, false_alarms, ensemble.threshold, ensemble.grid_s * stride)
    metrics = dict(manifest.get("metrics", {}))
    # the per-prediction fpr the worker reports (UC in reasons): now the online one of the calibration data
    metrics["lstm"] = {**metrics.get("lstm", {}), "threshold": chosen["threshold"], "fpr": chosen["fpr_per_step"],
                       "roc_threshold": before, "fpr_source": "online calibration"}
    meta.update({"metrics": metrics, "calibration": calibration})
    try:
        save_model(ensemble, out, meta)
    except OSError as exc:
        raise TrainingError(f"cannot write model to {out}: {exc}") from exc
    return {"model": str(out), "version": ensemble.version, "threshold": chosen["threshold"],
            "threshold_before": before, "chosen": chosen, "before": own, "node_days": node_days,
            "false_alarms_budget": false_alarms, "notes": notes, "curve": curve}
