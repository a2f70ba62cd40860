"""Real-time IO degradation detection from 1-minute observation windows (seed 004 §4.5).

The 1 s system-aggregate read and write rates are cut into 1-minute observation
windows; each window is described by min, max, median, mean, variance and standard
deviation of read and of write (12 features).  A window's label is the mean runtime
ratio (runtime / expected) of the probe jobs executing in it; it is *degraded* when
that ratio exceeds ``threshold`` (1.05 = "> 5 %").  Labels arrive late — only when the
probes overlapping the window have completed — so windows wait in a
:class:`LateLabeler` before joining the training bank.

The detector predicts every new window before it joins the bank, starts after an
initial 24 h bank and is retrained every 10 minutes of stream time.  k-NN (the
model CanarIO selects, Fig. 4.11) and random-forest / decision-tree alternatives
are available.  Features are log-scaled (``log1p``) and standardised on the bank.

Example
-------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> det = IoDegradationDetector(initial_bank_s=600, retrain_every_s=600)
>>> for i in range(30):
...     slow = i % 3 == 0
...     f = io_window_features(rng.normal(1e9 / (3 if slow else 1), 1e8, 60), rng.normal(1e9, 1e8, 60))
...     _ = det.observe_window(f, window_end=60.0 * (i + 1))
...     _ = det.add_label(60.0 * (i + 1), 2.0 if slow else 1.0)
>>> f = io_window_features(rng.normal(3.3e8, 1e8, 60), rng.normal(1e9, 1e8, 60))
>>> det.observe_window(f, window_end=1860.0)[0]
True
"""
from __future__ import annotations

import base64
import math
import warnings
from typing import Iterable, Optional, Sequence

import numpy as np

from hpcguard.models.features import IO_STATISTICS, io_window_features  # noqa: F401  (re-exported)

WINDOW_S = 60.0
IO_FEATURE_NAMES: tuple[str, ...] = tuple(f"{m}_{st}" for m in ("read", "write") for st in IO_STATISTICS)
MODELS = ("knn", "rf", "dt")


def _pack(rows: Sequence[np.ndarray]) -> str:
    """Feature rows as base64 float64 (exact, and a third of the JSON text)."""
    return base64.b64encode(np.asarray(rows, dtype="<f8").reshape(-1, len(IO_FEATURE_NAMES)).tobytes()).decode()


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f8").reshape(-1, len(IO_FEATURE_NAMES)).copy()


# --------------------------------------------------------------------------- features
def io_window_features_batch(read: np.ndarray, write: np.ndarray, samples_per_window: int = 60) -> np.ndarray:
    """Vectorised :func:`~hpcguard.models.features.io_window_features` over consecutive windows.

    ``read`` and ``write`` are 1 s rates on a regular grid (NaN = missing); a trailing
    partial window is dropped.  Returns ``(n_windows, 12)`` in :data:`IO_FEATURE_NAMES` order.

    >>> io_window_features_batch(np.arange(120.0), np.zeros(120)).shape
    (2, 12)
    """
    read = np.asarray(read, float)
    write = np.asarray(write, float)
    if read.shape != write.shape or read.ndim != 1:
        raise ValueError("read and write must be 1-D arrays of equal length")
    w = read.size // samples_per_window
    cols = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for series in (read, write):
            x = series[: w * samples_per_window].reshape(w, samples_per_window)
            cols += [np.nanmin(x, 1), np.nanmax(x, 1), np.nanmedian(x, 1), np.nanmean(x, 1),
                     np.nanvar(x, 1), np.nanstd(x, 1)]
    return np.column_stack(cols) if w else np.empty((0, len(IO_FEATURE_NAMES)))


def feature_vector(features: dict) -> np.ndarray:
    """Order a feature dict (:func:`io_window_features`) as :data:`IO_FEATURE_NAMES`."""
    try:
        return np.array([float(features[k]) for k in IO_FEATURE_NAMES])
    except KeyError as exc:
        raise ValueError(f"IO window features lack {exc.args[0]!r}; need {IO_FEATURE_NAMES}") from None


def _log_scale(x: np.ndarray) -> np.ndarray:
    return np.log1p(np.maximum(np.nan_to_num(np.asarray(x, float), nan=0.0), 0.0))


# --------------------------------------------------------------------------- labels
def window_probe_labels(window_start: np.ndarray, probe_start: np.ndarray, probe_end: np.ndarray,
                        probe_ratio: np.ndarray, window_s: float = WINDOW_S) -> tuple[np.ndarray, np.ndarray]:
    """Mean runtime ratio of the probes executing in each window, and when it is known.

    Parameters
    ----------
    window_start
        Regularly spaced window starts (step ``window_s``).
    probe_start, probe_end, probe_ratio
        Completed probe runs and their runtime ratio (runtime / expected).

    Returns
    -------
    ``(ratio, label_time)``: NaN ratio where no probe ran; ``label_time`` is the
    completion time of the last probe overlapping the window (never before the
    window's end) — the earliest moment the label exists.
    """
    ws = np.asarray(window_start, float)
    n = ws.size
    ratio_sum = np.zeros(n + 1)
    count = np.zeros(n + 1)
    ps, pe, pr = (np.asarray(a, float) for a in (probe_start, probe_end, probe_ratio))
    if n == 0:
        return np.empty(0), np.empty(0)
    i0 = np.clip(np.floor((ps - ws[0]) / window_s), 0, n).astype(int)
    i1 = np.clip(np.ceil((pe - ws[0]) / window_s), 0, n).astype(int)
    keep = (i1 > i0) & np.isfinite(pr)
    np.add.at(ratio_sum, i0[keep], pr[keep])
    np.add.at(ratio_sum, i1[keep], -pr[keep])
    np.add.at(count, i0[keep], 1)
    np.add.at(count, i1[keep], -1)
    c = np.round(np.cumsum(count)[:n])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(c > 0, np.cumsum(ratio_sum)[:n] / np.maximum(c, 1), np.nan)
    label_time = ws + window_s
    order = np.argsort(pe[keep])  # later ends overwrite earlier ones
    for a, b, e in zip(i0[keep][order], i1[keep][order], pe[keep][order]):
        label_time[a:b] = np.maximum(label_time[a:b], e)
    return ratio, label_time


class LateLabeler:
    """Holds windows until every probe overlapping them has completed.

    Probe start events are optional: with them a window is final as soon as no
    started probe that overlaps it is still running; without them (or for a probe
    whose start was never seen) a window is final ``timeout_s`` after its end.

    >>> lab = LateLabeler(timeout_s=3000)
    >>> lab.add_window(60.0, {"x": 1})
    >>> lab.probe_started("p1", 30.0)
    >>> lab.ready(100.0)
    []
    >>> lab.probe_completed("p1", 30.0, 400.0, 1.2)
    >>> [(w, round(r, 2)) for w, _f, r in lab.ready(400.0)]
    [(60.0, 1.2)]
    """

    def __init__(self, window_s: float = WINDOW_S, timeout_s: float = 3 * 1408.0) -> None:
        self.window_s = window_s
        self.timeout_s = timeout_s
        self._windows: dict[float, list] = {}   # window_end -> [features, ratio_sum, count]
        self._running: dict[str, float] = {}     # probe_id -> start
        self._tracking = False
        # completed probes kept for windows that have not arrived yet: probes and IO come on
        # different topics, and a replay at full speed does not interleave them in time
        self._completed: list[tuple[float, float, float]] = []

    def __len__(self) -> int:
        return len(self._windows)

    def add_window(self, window_end: float, features) -> None:
        slot = [features, 0.0, 0]
        for start, end, ratio in self._completed:
            if start < window_end and end > window_end - self.window_s:
                slot[1] += ratio
                slot[2] += 1
        self._windows[float(window_end)] = slot
        horizon = window_end - self.window_s - self.timeout_s
        self._completed = [p for p in self._completed if p[1] > horizon]

    def probe_started(self, probe_id: str, start: float) -> None:
        self._tracking = True
        self._running[probe_id] = float(start)

    def probe_completed(self, probe_id: str, start: float, end: float, ratio: float) -> None:
        """Credit ``ratio`` to every pending window overlapping ``[start, end]``."""
        self._running.pop(probe_id, None)
        if not math.isfinite(ratio):
            return
        self._completed.append((float(start), float(end), float(ratio)))
        for w_end, slot in self._windows.items():
            if start < w_end and end > w_end - self.window_s:
                slot[1] += ratio
                slot[2] += 1

    def to_state(self) -> dict:
        """JSON-safe state (window features must be JSON-safe, e.g. dicts of floats)."""
        return {"windows": [[w, *slot] for w, slot in self._windows.items()], "running": dict(self._running),
                "tracking": self._tracking, "completed": [list(p) for p in self._completed]}

    def load_state(self, state: dict) -> "LateLabeler":
        self._windows = {float(w): [f, float(s), int(c)] for w, f, s, c in state["windows"]}
        self._running = {str(k): float(v) for k, v in state["running"].items()}
        self._tracking = bool(state["tracking"])
        self._completed = [tuple(map(float, p)) for p in state["completed"]]
        return self

    def ready(self, now: float) -> list[tuple[float, object, float]]:
        """Pop the windows final at window time ``now`` (the caller has applied the probes that ended by
        ``now``): ``(window_end, features, mean_ratio)``; NaN ratio if no probe ran."""
        oldest_running = min(self._running.values(), default=math.inf)
        out = []
        for w_end in sorted(self._windows):
            blocked_by_probe = oldest_running < w_end
            # final ``timeout_s`` (longer than any probe run) after its end, in window time: every probe
            # overlapping it has ended by then, and the window joins the bank at the same window time
            # however far the probe stream (another topic) runs ahead
            final = now >= w_end + self.timeout_s or (self._tracking and now >= w_end and not blocked_by_probe)
            if not final:
                continue
            feats, s, c = self._windows.pop(w_end)
            out.append((w_end, feats, s / c if c else float("nan")))
        return out


# --------------------------------------------------------------------------- models
class _Knn:
    """k nearest neighbours on standardised log features; probability = degraded share."""

    def __init__(self, k: int = 5) -> None:
        self.k = k

    def fit(self, x: np.ndarray, ratio: np.ndarray) -> "_Knn":
        from sklearn.neighbors import NearestNeighbors

        self._mu = x.mean(0)
        self._sd = np.where(x.std(0) > 0, x.std(0), 1.0)
        self._ratio = ratio
        self._nn = NearestNeighbors(n_neighbors=min(self.k, len(x))).fit((x - self._mu) / self._sd)
        return self

    def neighbours(self, x: np.ndarray) -> np.ndarray:
        return self._nn.kneighbors((x - self._mu) / self._sd, return_distance=False)

    def proba(self, x: np.ndarray, threshold: float) -> np.ndarray:
        return (self._ratio[self.neighbours(x)] > threshold).mean(1)


def _tree_model(kind: str, seed: int):
    if kind == "rf":
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=10, max_depth=12, n_jobs=1, random_state=seed)
    if kind == "dt":
        from sklearn.tree import DecisionTreeClassifier

        return DecisionTreeClassifier(max_depth=12, random_state=seed)
    raise ValueError(f"unknown detector model {kind!r}; choose one of {MODELS}")


def _fit_predict_tree(kind: str, seed: int, x: np.ndarray, y: np.ndarray, xq: np.ndarray) -> np.ndarray:
    if y.all() or not y.any():
        return np.full(len(xq), float(y[0]) if len(y) else 0.0)
    model = _tree_model(kind, seed).fit(x, y)
    return model.predict_proba(xq)[:, 1]


class IoDegradationDetector:
    """Online detector: predict each new window, learn from late labels, retrain on a cadence.

    Parameters
    ----------
    model
        ``"knn"`` (default, CanarIO's choice), ``"rf"`` or ``"dt"``.
    k
        Neighbours for k-NN.
    threshold
        Degraded when the window's mean probe runtime ratio exceeds it (1.05 = 5 %).
    initial_bank_s
        Stream time collected before the first training (24 h).
    retrain_every_s
        Retraining cadence in stream time (10 min).
    max_bank
        At each retraining keep at most this many most recent labelled windows (None = all).
    """

    def __init__(self, model: str = "knn", k: int = 5, threshold: float = 1.05, initial_bank_s: float = 86400.0,
                 retrain_every_s: float = 600.0, max_bank: Optional[int] = None, seed: int = 0) -> None:
        if model not in MODELS:
            raise ValueError(f"unknown detector model {model!r}; choose one of {MODELS}")
        self.model_name = model
        self.k = k
        self.threshold = threshold
        self.initial_bank_s = initial_bank_s
        self.retrain_every_s = retrain_every_s
        self.max_bank = max_bank
        self.seed = seed
        self._pending: dict[float, np.ndarray] = {}
        self._bank_x: list[np.ndarray] = []
        self._bank_ratio: list[float] = []
        self._first_end: Optional[float] = None
        self._next_retrain: Optional[float] = None
        self._model = None
        self._fit_rows = 0  # the model was fitted on the bank's first _fit_rows rows
        self.retrain_times: list[float] = []  # this process's retrainings (not part of the state)

    @property
    def trained(self) -> bool:
        return self._model is not None

    @property
    def bank_size(self) -> int:
        return len(self._bank_ratio)

    def observe_window(self, features: dict | np.ndarray, window_end: float) -> tuple[bool, float]:
        """Predict the window (before it joins the bank); ``(degraded, probability)``.

        Before the first training the answer is ``(False, 0.0)``.
        """
        x = feature_vector(features) if isinstance(features, dict) else np.asarray(features, float)
        if x.shape != (len(IO_FEATURE_NAMES),):
            raise ValueError(f"expected {len(IO_FEATURE_NAMES)} features, got shape {x.shape}")
        window_end = float(window_end)
        if self._first_end is None:
            self._first_end = window_end
            self._next_retrain = window_end + self.initial_bank_s
        if window_end >= self._next_retrain:
            self.retrain(window_end)
            steps = math.floor((window_end - self._next_retrain) / self.retrain_every_s) + 1
            self._next_retrain += steps * self.retrain_every_s
        self._pending[window_end] = _log_scale(x)
        if self._model is None:
            return False, 0.0
        p = float(self._predict(_log_scale(x)[None, :])[0])
        return p > 0.5, p

    def add_label(self, window_end: float, ratio: float) -> bool:
        """Label a previously observed window; it joins the bank. False if unknown or unlabelled."""
        x = self._pending.pop(float(window_end), None)
        if x is None or not math.isfinite(ratio):
            return False
        self._bank_x.append(x)
        self._bank_ratio.append(float(ratio))
        return True

    def retrain(self, now: float) -> None:
        """Refit on the current bank (no-op while the bank is empty)."""
        self.retrain_times.append(float(now))
        if self.max_bank and len(self._bank_ratio) > self.max_bank:
            del self._bank_x[:-self.max_bank], self._bank_ratio[:-self.max_bank]
        self._fit_rows = len(self._bank_ratio)
        self._fit()

    def _fit(self) -> None:
        if not self._fit_rows:
            return
        x = np.vstack(self._bank_x[:self._fit_rows])
        ratio = np.array(self._bank_ratio[:self._fit_rows])
        if self.model_name == "knn":
            self._model = _Knn(self.k).fit(x, ratio)
            return
        y = ratio > self.threshold
        self._model = float(y[0]) if (y.all() or not y.any()) else _tree_model(self.model_name, self.seed).fit(x, y)

    def to_state(self) -> dict:
        """JSON-safe state: the bank (base64 float64 rows), windows awaiting labels, the cadence.

        >>> det = IoDegradationDetector(initial_bank_s=0.0, retrain_every_s=60.0)
        >>> _ = det.observe_window(np.ones(12), 60.0); _ = det.add_label(60.0, 2.0)
        >>> det.observe_window(np.ones(12), 120.0)      # trained on the one labelled window
        (True, 1.0)
        >>> _ = det.add_label(120.0, 1.0)               # joins the bank; the model waits for the next retraining
        >>> twin = IoDegradationDetector(initial_bank_s=0.0, retrain_every_s=60.0).load_state(det.to_state())
        >>> twin.observe_window(np.ones(12), 150.0) == det.observe_window(np.ones(12), 150.0) == (True, 1.0)
        True
        """
        return {"bank_x": _pack(self._bank_x), "bank_ratio": list(self._bank_ratio), "fit_rows": self._fit_rows,
                "pending_end": list(self._pending), "pending_x": _pack(list(self._pending.values())),
                "first_end": self._first_end, "next_retrain": self._next_retrain}

    def load_state(self, state: dict) -> "IoDegradationDetector":
        """Restore :meth:`to_state` (the model is refitted on the same bank rows)."""
        self._bank_x = list(_unpack(state["bank_x"]))
        self._bank_ratio = [float(r) for r in state["bank_ratio"]]
        self._pending = dict(zip((float(t) for t in state["pending_end"]), _unpack(state["pending_x"])))
        self._first_end, self._next_retrain = state["first_end"], state["next_retrain"]
        self._fit_rows, self._model = int(state["fit_rows"]), None
        self._fit()
        return self

    def _predict(self, xq: np.ndarray) -> np.ndarray:
        if self.model_name == "knn":
            return self._model.proba(xq, self.threshold)
        if isinstance(self._model, float):  # the bank held a single class
            return np.full(len(xq), self._model)
        return self._model.predict_proba(xq)[:, 1]


# --------------------------------------------------------------------------- batch replay
def replay_detector(x: np.ndarray, window_end: np.ndarray, ratio: np.ndarray, label_time: np.ndarray,
                    model: str = "knn", thresholds: Sequence[float] = (1.05,), k: int = 5,
                    initial_bank_s: float = 86400.0, retrain_every_s: float = 600.0,
                    seed: int = 0) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Vectorised replay of :class:`IoDegradationDetector` over a recorded window stream.

    Identical semantics with an unbounded bank (``max_bank=None``, the research setting of
    seed 004): at each retrain the bank holds the windows observed so far whose label time
    is not after the triggering window's end; every window from the first retrain on is
    predicted by the latest model.

    Returns
    -------
    ``(predicted, {threshold: probability})``: mask of windows that received a
    prediction and, per threshold definition, each window's probability (NaN where
    none).  k-NN neighbours are computed once per retrain and shared by all
    thresholds (they do not depend on labels).
    """
    if model not in MODELS:
        raise ValueError(f"unknown detector model {model!r}; choose one of {MODELS}")
    x = _log_scale(x)
    window_end = np.asarray(window_end, float)
    ratio = np.asarray(ratio, float)
    label_time = np.asarray(label_time, float)
    n = window_end.size
    probs = {t: np.full(n, np.nan) for t in thresholds}
    predicted = np.zeros(n, bool)
    if n == 0:
        return predicted, probs
    # retrain triggers: first window at/after each point of the cadence grid
    first = window_end[0] + initial_bank_s
    grid_idx = np.floor((window_end - first) / retrain_every_s)
    trigger = np.flatnonzero((window_end >= first) & np.r_[True, grid_idx[1:] != grid_idx[:-1]])
    bounds = np.r_[trigger, n]
    for b0, b1 in zip(bounds[:-1], bounds[1:]):
        t_now = window_end[b0]
        bank = (window_end < t_now) & (label_time <= t_now) & np.isfinite(ratio)
        predicted[b0:b1] = True
        if not bank.any():
            for t in thresholds:
                probs[t][b0:b1] = 0.0
            continue
        if model == "knn":
            knn = _Knn(k).fit(x[bank], ratio[bank])
            neigh_ratio = ratio[bank][knn.neighbours(x[b0:b1])]
            for t in thresholds:
                probs[t][b0:b1] = (neigh_ratio > t).mean(1)
        else:
            for t in thresholds:
                probs[t][b0:b1] = _fit_predict_tree(model, seed, x[bank], ratio[bank] > t, x[b0:b1])
    return predicted, probs


# --------------------------------------------------------------------------- metrics
def binary_rates(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """F1, precision, recall and TP/FP/TN/FN rates (Figs. 4.12–4.13).

    ``tpr`` = TP/(TP+FN) (share of degraded windows detected), ``tnr`` = TN/(TN+FP)
    (share of non-degraded windows correctly identified), ``fpr`` = 1 − tnr,
    ``fnr`` = 1 − tpr.  Undefined ratios are NaN.

    >>> binary_rates(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]))["tnr"]
    1.0
    """
    y_true = np.asarray(y_true, bool)
    y_pred = np.asarray(y_pred, bool)
    tp = int((y_true & y_pred).sum())
    fp = int((~y_true & y_pred).sum())
    tn = int((~y_true & ~y_pred).sum())
    fn = int((y_true & ~y_pred).sum())

    def div(a: float, b: float) -> float:
        return a / b if b else float("nan")

    precision, recall = div(tp, tp + fp), div(tp, tp + fn)
    f1 = div(2 * precision * recall, precision + recall) if tp else (0.0 if (fp or fn) else float("nan"))
    return {"f1": f1, "precision": precision, "recall": recall, "tpr": recall, "tnr": div(tn, tn + fp),
            "fpr": div(fp, tn + fp), "fnr": div(fn, tp + fn), "tp": tp, "fp": fp, "tn": tn, "fn": fn,
            "n": tp + fp + tn + fn}


def episode_detection(window_end: np.ndarray, degraded_pred: np.ndarray, episodes: Iterable[dict],
                      window_s: float = WINDOW_S) -> list[dict]:
    """Per ground-truth episode: windows inside it, share predicted degraded, detected (any)."""
    window_end = np.asarray(window_end, float)
    degraded_pred = np.asarray(degraded_pred, bool)
    out = []
    for ep in episodes:
        inside = (window_end - window_s >= ep["start"]) & (window_end <= ep["end"])
        n = int(inside.sum())
        hits = int(degraded_pred[inside].sum())
        out.append({**ep, "windows": n, "detected_windows": hits,
                    "detected_share": hits / n if n else float("nan"), "detected": bool(hits > 0)})
    return out
