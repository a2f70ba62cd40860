"""The node agent's predictor: the failure ensemble when a model directory is given,
else the baseline detector.  One ``predict`` call evaluates every node due in a tick.

Contract with the worker and the offline scan (``models.failure.evaluation.online_scan``
calls the same ``predict``): a predictor has ``name``, ``version``, ``history_steps``
(15 s grid steps of the node's own history it needs) and
``predict(nodes, windows (n, history_steps, 10)) -> list[Verdict]`` on the canonical
sensor order, NaN for missing."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hpcguard.models.baseline import NAME as BASELINE_NAME
from hpcguard.models.baseline import BaselineDetector
from hpcguard.streams import metrics


@dataclass
class Verdict:
    failure_probability: float
    warn: bool
    lead_minutes: float
    network_probabilities: list[float]
    vote: str
    detail: dict[str, Any]
    score: float | None = None  # what a budgeted threshold is compared with (EnsemblePredictor.score_floor)


class BaselinePredictor:
    def __init__(self, detector: BaselineDetector, version: str, lead_minutes: float = 2.0):
        self.detector = detector
        self.name = BASELINE_NAME
        self.version = version
        self.lead_minutes = lead_minutes
        self.history_steps = detector.history_steps
        self.fpr: float | None = None

    def predict(self, nodes: list[str], windows: np.ndarray, earlier: np.ndarray | None = None) -> list[Verdict]:
        started = time.perf_counter()
        scores = self.detector.score_many(windows)
        warn = self.detector.predict_many(windows)
        metrics.INFERENCE_SECONDS.labels(self.name).observe(time.perf_counter() - started)
        out = []
        for i in range(len(nodes)):
            detail = {"score": round(float(scores[i]), 4)}
            if warn[i]:
                detail["sensors"] = self.detector.violations(windows[i])
            out.append(Verdict(failure_probability=float(min(1.0, scores[i])), warn=bool(warn[i]),
                               lead_minutes=self.lead_minutes, network_probabilities=[],
                               vote=f"persistence>={self.detector.persistence}", detail=detail))
        return out


class EnsemblePredictor:
    """Wraps ``models.failure.ensemble.FailureEnsemble`` loaded from a model directory."""

    def __init__(self, ensemble: Any, version: str, metadata: dict[str, Any]):
        self.ensemble = ensemble
        self.name = "failure-ensemble"
        self.version = version
        self.metadata = metadata
        self.fpr = metadata.get("metrics", {}).get("lstm", {}).get("fpr")  # measured at training (UC in reasons)
        self.history_steps = ensemble.history_steps
        self.features = ensemble.feature_set.name
        self.threshold = float(ensemble.threshold)  # the model's own: a budget controller's starting point
        # set (the controller's floor) when a false-alarm budget moves the threshold: each verdict then
        # carries the online vote the threshold is compared with (FailureEnsemble.vote_score)
        self.score_floor: float | None = None

    @property
    def persistence(self) -> int:
        return int(getattr(self.ensemble, "persistence", 1))

    @property
    def budgetable(self) -> bool:
        """Whether a threshold on one score decides the warnings (the LSTM vote), so a budget can move it."""
        return getattr(self.ensemble, "vote", "lstm") == "lstm"

    def predict(self, nodes: list[str], windows: np.ndarray, earlier: np.ndarray | None = None,
                earlier_rows: np.ndarray | None = None) -> list[Verdict]:
        """``earlier``/``earlier_rows``: the latest votes (``failure_probability``) of each node's
        ``persistence − 1`` previous steps the caller has, or the rows of this call that give them
        (``FailureEnsemble.predict_scored``), so the budget's score does not infer them again."""
        started = time.perf_counter()
        scores = [None] * len(nodes)
        if self.score_floor is not None and self.budgetable:
            out, score = self.ensemble.predict_scored(windows, self.score_floor, earlier, earlier_rows)
            scores = score.tolist()
        else:
            out = self.ensemble.predict_windows(windows)
        metrics.INFERENCE_SECONDS.labels(self.name).observe(time.perf_counter() - started)
        vote = getattr(self.ensemble, "vote_name", "lstm")
        return [Verdict(failure_probability=float(out.vote_probability[i]), warn=bool(out.warn[i]),
                        lead_minutes=float(out.lead_minutes[i]),
                        network_probabilities=[round(float(p), 6) for p in out.network_probabilities[i]],
                        vote=vote, detail={"features": self.features}, score=scores[i]) for i in range(len(nodes))]


def load_predictor(model_dir: str | None) -> BaselinePredictor | EnsemblePredictor | None:
    """Load what ``model_dir`` holds: an ensemble (``hpcguard train failure``) or a
    baseline (``baseline.json``).  ``None`` when no directory is given."""
    if not model_dir:
        return None
    path = Path(model_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"model directory not found: {path}")
    baseline = path / "baseline.json"
    if (path / "manifest.json").exists() or any(path.glob("*.pt")):
        from hpcguard.connectors.model_store import load_model

        ensemble, manifest = load_model(str(path))
        return EnsemblePredictor(ensemble, str(ensemble.version), manifest)
    if baseline.exists():
        state = json.loads(baseline.read_text())
        return BaselinePredictor(BaselineDetector.from_state(state), version=state.get("version", path.name))
    raise ValueError(f"{path} holds neither a failure-ensemble model nor baseline.json")
