"""The self-describing failure ensemble: six lead-time networks plus their vote.

``FailureEnsemble`` holds everything inference needs — the six networks, the LSTM
voter and its ROC-chosen threshold, the training medians used to impute missing
features, the normalisation statistics, the sensor list and the window/lead
parameters — and round-trips through ``to_state`` / ``from_state`` (plain dicts of
lists plus torch state dicts; ``connectors.model_store`` writes them to a directory).

Vote order follows seed 000 Fig. 4.4: the sequence starts with the 7-minute network
and ends with the 2-minute one, so ``unanimous_vote`` over the first ``n`` networks
of ``sequence`` uses the longest leads first.

Online use (:meth:`FailureEnsemble.predict_windows`) reads a node's own history.  With
``lead_shift`` (seed 000 Fig. 4.4: the classification sequence rotates the sensor data
from the 7-minute network to the 2-minute one) network ``i`` sees the window ending
``lead_i − min(leads)`` minutes before the newest step, so the vote at ``t`` is the vote
of an event at ``t + min(leads)``, the input the voter was trained and thresholded on;
without it (models trained before ``lead_shift`` existed) every network sees the same
latest window (``features (N, 70)``).  The reported lead of a warning is the *smallest*
lead among the networks that fired (the most conservative deadline; 2 min when none
fired on its own but the LSTM vote did), unless the model carries a ``lead_calibration``
(:func:`calibrate_leads`, measured by ``models.failure.site_training.warned_leads`` when a site
trains): then the lead of a warning is read from a table keyed by the largest lead among the
networks that fired, each entry a conservative quantile of the time from the first online
warning to the failure that the failures of the voter's period (which the networks never saw)
really had: a lower 80 % confidence bound of their 25th percentile, pooled over all keys where
a key's own failures are too few (``LEAD_QUANTILE``, ``LEAD_CONFIDENCE`` say why).  For the
paper's evaluation protocol, pass per-lead features ``(N, 6, 70)``: network ``i`` sees the window ending lead ``i``
before the event.

Example
-------
>>> import numpy as np
>>> ens = FailureEnsemble.untrained(seed=0)
>>> out = ens.predict_batch(np.zeros((4, 70)))
>>> out.network_probabilities.shape, out.vote_probability.shape, out.warn.dtype.name
((4, 6), (4,), 'bool')
>>> FailureEnsemble.from_state(ens.to_state()).predict_batch(np.zeros((4, 70))).vote_probability.tolist() \\
...     == out.vote_probability.tolist()
True
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from hpcguard.models.failure.dataset import WINDOW_STEPS, impute, lead_offsets
from hpcguard.models.failure.encoder import SequenceEncoder, encoder_feature_set
from hpcguard.models.failure.networks import N_INPUTS, LeadNetwork, StackedNetworks, make_networks
from hpcguard.models.failure.trees import BoostedTrees, trees_feature_set
from hpcguard.models.failure.voting import LstmVoter, VoterWeights, unanimous_vote
from hpcguard.models.features import CANONICAL_SENSORS, feature_set

MODEL_KIND = "hpcguard-failure-ensemble"
# learned feature set -> (its front-end's class, the feature set of a fitted one)
_LEARNED = {"conv": (SequenceEncoder, encoder_feature_set), "trees": (BoostedTrees, trees_feature_set)}
FORMAT_VERSION = 1


class EnsembleOutput(NamedTuple):
    network_probabilities: np.ndarray  # (N, 6) failure probability per network, lead order 2..7 min
    vote_probability: np.ndarray       # (N,) LSTM vote probability
    warn: np.ndarray                   # (N,) final prediction of the configured vote
    lead_minutes: np.ndarray           # (N,) calibrated lead of the fired networks' key (lead_calibration),
                                       # else the smallest lead whose network fired (smallest lead if none fired)


# The lead a warning reports is a deadline the decision policy plans to (checkpoint or migrate
# before it): one too late loses the job, one too early only costs a checkpoint taken sooner than
# needed.  So it is a low quantile of the times to failure measured in training, not their median
# (LEAD_QUANTILE: 3 warned failures in 4 had at least this long), and, since a site's history holds
# few failures, a lower confidence bound of that quantile (LEAD_CONFIDENCE), not its point estimate.
# Measured on two simulated 64-node days (classic profile, --features paper, each model tested on
# the other day): the voter's period gave 29 and 20 warned failures; the point estimate of the 25th
# percentile from the validation half's 12 let only 60 % of the held-out day's warned failures reach
# the lead, the 80 % bound from the voter's period 71 % and 98 % (its real 25th percentiles: 1.9 and
# 2.5 min).  A key whose failures cannot bound it (fewer than 6 at 25 % and 80 %) takes the lead of
# all the failures pooled; with fewer than that in all, the model keeps the smallest lead that fired.
LEAD_QUANTILE = 0.25
LEAD_CONFIDENCE = 0.8


def lead_keys(fired: np.ndarray, leads) -> np.ndarray:
    """``(N,)`` the largest lead (minutes) among the networks that fired per row of ``fired (N, networks)``,
    0 where none fired: the key of :func:`calibrate_leads`.

    >>> lead_keys(np.array([[True, False, True], [False, False, False]]), (2, 3, 4)).tolist()
    [4, 0]
    """
    f = np.asarray(fired, bool)
    if not f.size:
        return np.zeros(f.shape[0], int)
    return np.where(f, np.asarray(leads, int)[None, :], 0).max(axis=1)


def quantile_lower_bound(values, quantile: float = LEAD_QUANTILE, confidence: float = LEAD_CONFIDENCE
                         ) -> float | None:
    """Distribution-free lower confidence bound of the ``quantile`` of what ``values`` sample: their
    ``k``-th smallest, with ``k`` the largest such that ``P(Binomial(n, quantile) >= k) >= confidence``
    (the chance that at least ``k`` draws fall below the true quantile).  ``None`` when even the
    smallest cannot bound it (``1 − (1 − quantile)^n < confidence``: too few values).

    >>> quantile_lower_bound(np.arange(1.0, 101.0))       # the 25th percentile of 1..100 is 25.75
    21.0
    >>> quantile_lower_bound([3.0, 1.0, 2.0, 4.0, 5.0]) is None, quantile_lower_bound([3.0, 1.0, 2.0, 4.0, 5.0, 6.0])
    (True, 1.0)
    """
    from scipy.stats import binom

    if not (0 < quantile < 1 and 0 < confidence < 1):
        raise ValueError(f"quantile and confidence must be in (0, 1), got {quantile}, {confidence}")
    v = np.sort(np.asarray(values, float))
    k = int((binom.sf(np.arange(v.size), v.size, quantile) >= confidence).sum())   # sf(k − 1) = P(X >= k)
    return float(v[k - 1]) if k else None


def calibrate_leads(keys, minutes, quantile: float = LEAD_QUANTILE,
                    confidence: float = LEAD_CONFIDENCE) -> dict[str, Any] | None:
    """The lead table of :class:`FailureEnsemble`: per key (:func:`lead_keys` at a failure's first
    warning), the lower ``confidence`` bound of the ``quantile`` of the warned failures' times to
    failure (``minutes``; :func:`quantile_lower_bound`, rounded down to 0.01 min): at least
    ``1 − quantile`` of the failures it rests on had at least that long, and, with that confidence,
    at least as many of the failures to come.  A key whose failures cannot bound it is left out
    and takes ``overall`` (all failures pooled); ``None`` when all of them cannot either (or none
    was warned).  ``median`` is the pooled failures' median time to failure (for the report).

    >>> rng = np.random.default_rng(0)
    >>> t = calibrate_leads([7] * 40 + [3] * 5, np.r_[rng.uniform(3, 12, 40), rng.uniform(1, 2, 5)])
    >>> t["by_key"], t["overall"], t["failures"], t["failures_by_key"]
    ({'7': 4.58}, 3.3, 45, {'3': 5, '7': 40})
    >>> calibrate_leads([7] * 5, [4.0, 6.0, 8.0, 10.0, 1.0]) is None      # 5 failures bound nothing
    True
    """
    k = np.asarray(keys, int)
    m = np.asarray(minutes, float)
    ok = np.isfinite(m)
    k, m = k[ok], m[ok]
    overall = quantile_lower_bound(m, quantile, confidence) if m.size else None
    if overall is None:
        return None

    def down(x: float) -> float:   # to 0.01 min, never above what was measured
        return float(np.floor(x * 100 + 1e-9) / 100)

    by_key = {}
    for u in np.unique(k):
        bound = quantile_lower_bound(m[k == u], quantile, confidence)
        if bound is not None:
            by_key[str(int(u))] = down(bound)
    counts = {str(int(u)): int((k == u).sum()) for u in np.unique(k)}
    return {"by_key": by_key, "overall": down(overall), "quantile": float(quantile), "confidence": float(confidence),
            "failures": int(m.size), "failures_by_key": counts, "median": down(float(np.median(m)))}


def _node_down(w: np.ndarray) -> np.ndarray:
    """Histories holding a step with no sensor at all: the node was down or restarting."""
    return np.isnan(w).all(axis=2).any(axis=1)


class FailureEnsemble:
    """Six lead-time networks + LSTM voter + preprocessing.

    Parameters
    ----------
    nets, voter
        Trained ``LeadNetwork`` list (lead order) and ``LstmVoter``.
    medians, mean, std
        ``(70,)`` imputation medians and normalisation statistics learned on training data.
    threshold
        LSTM decision threshold (vote probability ≥ threshold warns).
    vote
        ``"lstm"`` (default) or ``"unanimous"`` (all of the first ``n_unanimous`` networks).
    features
        Name of the feature set (``models.features.FEATURE_SETS``) the networks read;
        ``"conv"`` and ``"trees"`` read the outputs of ``encoder``, the model's fitted front-end
        (``models.failure.encoder.SequenceEncoder``, ``models.failure.trees.BoostedTrees``).
    persistence
        Online only (:meth:`predict_windows`): warn when the vote fires on each of the
        last ``persistence`` steps' histories — still a function of the node's own
        history, so ``history_steps`` grows by ``persistence − 1``.
    lead_shift
        Online only: network ``i`` reads the history ending ``lead_i − min(leads)`` minutes
        before the newest step (Fig. 4.4's rotating sequence), so ``history_steps`` grows by
        ``shift_steps``; False: every network reads the latest history.
    lead_calibration
        The lead table of :func:`calibrate_leads` (``by_key``, ``overall``): the lead a warning
        reports; ``None`` (models trained before it existed): the smallest lead that fired.
    """

    def __init__(self, nets: list[LeadNetwork], voter: LstmVoter, medians: np.ndarray, mean: np.ndarray,
                 std: np.ndarray, threshold: float = 0.5, vote: str = "lstm", n_unanimous: int = 6,
                 net_threshold: float = 0.5, grid_s: float = 15.0, window_steps: int = WINDOW_STEPS,
                 sensors: tuple[str, ...] = CANONICAL_SENSORS, version: str = "untrained",
                 info: dict[str, Any] | None = None, features: str = "paper", persistence: int = 1,
                 encoder: SequenceEncoder | BoostedTrees | None = None, lead_shift: bool = False,
                 lead_calibration: dict[str, Any] | None = None):
        if vote not in ("lstm", "unanimous"):
            raise ValueError(f"vote must be 'lstm' or 'unanimous', got {vote!r}")
        self.nets = nets
        self.voter = voter
        self._weights: tuple[list[tuple[torch.Tensor, int]], StackedNetworks, VoterWeights] | None = None
        self.leads = tuple(n.lead_minutes for n in nets)
        self.sequence = tuple(int(i) for i in np.argsort(self.leads)[::-1])  # 7 → 2 min (Fig. 4.4)
        self.medians = np.asarray(medians, float)
        self.mean = np.asarray(mean, float)
        self.std = np.asarray(std, float)
        self.threshold = float(threshold)
        self.vote = vote
        self.n_unanimous = int(n_unanimous)
        self.net_threshold = float(net_threshold)
        self.grid_s = float(grid_s)
        self.window_steps = int(window_steps)
        self.sensors = tuple(sensors)
        self.version = version
        self.info = dict(info or {})
        if (features in _LEARNED) != (encoder is not None) or (encoder is not None
                                                                and not isinstance(encoder, _LEARNED[features][0])):
            raise ValueError(f"the learned feature sets ({', '.join(_LEARNED)}) need their fitted front-end "
                             f"({', '.join(c.__name__ for c, _ in _LEARNED.values())}), and only they take one")
        self.encoder = encoder
        self.feature_set = _LEARNED[features][1](encoder) if encoder is not None else feature_set(features)
        if persistence < 1:
            raise ValueError(f"persistence must be >= 1, got {persistence}")
        self.persistence = int(persistence)
        self.lead_shift = bool(lead_shift)
        self.lead_calibration = dict(lead_calibration) if lead_calibration else None

    @property
    def shift_steps(self) -> tuple[int, ...]:
        """Per network (lead order): grid steps between the newest step and the end of the
        history it reads online (all 0 without ``lead_shift``)."""
        if not self.lead_shift or not self.leads:
            return (0,) * len(self.leads)
        offsets = lead_offsets(self.leads, self.grid_s)      # steps from each window's end to the event
        return tuple(int(o) for o in offsets - offsets.min())

    @property
    def history_steps(self) -> int:
        """Grid steps of a node's own history one online prediction needs."""
        return self.feature_set.history_steps + self.persistence - 1 + max(self.shift_steps, default=0)

    @property
    def vote_name(self) -> str:
        return "lstm" if self.vote == "lstm" else f"unanimous@{self.n_unanimous}"

    @classmethod
    def untrained(cls, seed: int = 0) -> "FailureEnsemble":
        torch.manual_seed(seed)
        return cls(make_networks(seed), LstmVoter(), np.zeros(N_INPUTS), np.zeros(N_INPUTS), np.ones(N_INPUTS))

    # -- inference -------------------------------------------------------------------
    def normalise(self, features: np.ndarray) -> np.ndarray:
        """Impute missing features with training medians, then z-score with training stats."""
        f = np.asarray(features, dtype=float)
        if f.shape[-1] != self.mean.size or f.ndim not in (2, 3):
            raise ValueError(f"features must be (N, {self.mean.size}) or (N, {len(self.nets)}, {self.mean.size}), "
                             f"got shape {f.shape}")
        if np.isnan(f).any():
            f = impute(f, self.medians)
        return (f - self.mean) / self.std

    def network_probabilities(self, features: np.ndarray) -> np.ndarray:
        """``(N, 6)`` failure probability of every network (lead order)."""
        return self._inference_weights()[0].failure_probabilities(self.normalise(features))

    def vote_probabilities(self, net_probs: np.ndarray) -> np.ndarray:
        """LSTM vote probability from ``(N, 6)`` network probabilities (lead order)."""
        return self._inference_weights()[1].vote(np.asarray(net_probs)[:, self.sequence])

    def _inference_weights(self) -> tuple[StackedNetworks, VoterWeights]:
        """The networks' and the voter's weights as inference reads them, fused once and fused
        again when a parameter was replaced (new networks, ``nets`` reassigned) or changed in
        place (an optimiser step, ``load_state_dict``: each bumps the tensor's version)."""
        params = [p for module in (*self.nets, self.voter) for p in module.parameters()]
        cached = self._weights
        if cached is None or len(cached[0]) != len(params) or any(
                p is not q or p._version != version for p, (q, version) in zip(params, cached[0])):
            cached = self._weights = ([(p, p._version) for p in params], StackedNetworks.from_networks(self.nets),
                                      VoterWeights.from_voter(self.voter))
        return cached[1], cached[2]

    def unanimous(self, net_probs: np.ndarray, n_networks: int) -> np.ndarray:
        """All-agree vote of the first ``n_networks`` of the sequence (7-min network first)."""
        return unanimous_vote(np.asarray(net_probs)[:, self.sequence], n_networks, self.net_threshold)

    def predict_batch(self, features: np.ndarray) -> EnsembleOutput:
        """Evaluate a batch of nodes: ``features (N, 70)`` (online) or ``(N, 6, 70)`` (per lead)."""
        probs = self.network_probabilities(features)
        vote_p = self.vote_probabilities(probs) if len(probs) else np.zeros(0)
        if self.vote == "lstm":
            warn = vote_p >= self.threshold
        else:
            warn = self.unanimous(probs, self.n_unanimous)
        fired = probs > self.net_threshold
        leads = np.asarray(self.leads, float)
        lead = np.where(fired, leads[None, :], np.inf).min(axis=1) if len(probs) else np.zeros(0)
        lead = np.where(np.isinf(lead), leads.min(), lead)
        if self.lead_calibration is not None and len(probs):
            lead = self._calibrated(lead_keys(fired, self.leads))
        return EnsembleOutput(probs, vote_p, warn, lead)

    def _calibrated(self, keys: np.ndarray) -> np.ndarray:
        """The calibrated lead (minutes) of each key: its own where the table has one, else the overall."""
        table = self.lead_calibration or {}
        by_key = np.full(max(self.leads, default=0) + 1, float(table["overall"]))
        for key, minutes in table.get("by_key", {}).items():
            if 0 <= int(key) < by_key.size:
                by_key[int(key)] = float(minutes)
        return by_key[keys]

    def predict_windows(self, windows: np.ndarray) -> EnsembleOutput:
        """Online prediction from ``(N, history_steps, S)`` node histories (NaN = missing).

        With ``persistence = p`` the vote must fire on each of the last ``p`` histories;
        the returned probabilities are those of the latest one.  A history that holds a
        step with no sensor at all (the node was down or restarting within it) never
        warns: the features would compare a reboot with the node's running state.
        """
        w = np.asarray(windows, dtype=float)
        if w.ndim != 3 or w.shape[1] != self.history_steps:
            raise ValueError(f"windows must be (N, {self.history_steps}, {len(self.sensors)}), got shape {w.shape}")
        out = self.predict_batch(self._features(w, 0))
        if self.vote == "lstm":
            warn = self._lowest_vote(w, out.vote_probability, floor=self.threshold) >= self.threshold
        else:
            warn = out.warn
            for back in range(1, self.persistence):   # earlier histories, latest first
                if not warn.any():
                    break
                warn = warn & self.predict_batch(self._features(w, back)).warn
        return out._replace(warn=warn & ~_node_down(w))

    def online_vote(self, windows: np.ndarray) -> np.ndarray:
        """The LSTM vote the online decision compares with ``threshold``, per history.

        With ``persistence = p`` it is the lowest vote of the last ``p`` histories, so
        :meth:`predict_windows` warns exactly where ``online_vote >= threshold``; NaN where
        the history holds a step with no sensor (never warns).  What an operating curve
        needs: the online warnings at any other threshold, from one pass.

        >>> import numpy as np
        >>> ens = FailureEnsemble.untrained(seed=0)
        >>> ens.persistence = 3                     # the vote must fire on 3 consecutive steps
        >>> w = np.random.default_rng(0).normal(size=(4, ens.history_steps, 10))
        >>> w[3, 5] = np.nan                        # node 3 was down for one step
        >>> v = ens.online_vote(w)
        >>> bool(np.isnan(v[3])), bool(((v >= ens.threshold) == ens.predict_windows(w).warn).all())
        (True, True)
        """
        w = np.asarray(windows, dtype=float)
        if w.ndim != 3 or w.shape[1] != self.history_steps:
            raise ValueError(f"windows must be (N, {self.history_steps}, {len(self.sensors)}), got shape {w.shape}")
        latest = self.vote_probabilities(self.network_probabilities(self._features(w, 0)))
        return np.where(_node_down(w), np.nan, self._lowest_vote(w, latest))

    def predict_scored(self, windows: np.ndarray, floor: float, earlier: np.ndarray | None = None,
                       earlier_rows: np.ndarray | None = None) -> tuple[EnsembleOutput, np.ndarray]:
        """:meth:`predict_windows` and :meth:`vote_score` in one pass, for a threshold that moves (never
        below ``floor``): the warnings at the model's own threshold, and the scores.  ``earlier`` as in
        :meth:`vote_score`; ``earlier_rows`` ``(N, persistence − 1)``: the row of this batch whose latest
        vote is that earlier one (−1: none), for a node's consecutive steps judged together.

        >>> import numpy as np
        >>> ens = FailureEnsemble.untrained(seed=0)
        >>> ens.persistence = 2
        >>> x = np.random.default_rng(2).normal(size=(ens.history_steps + 3, 10))
        >>> w = np.stack([x[k:k + ens.history_steps] for k in range(4)])     # one node's 4 consecutive steps
        >>> out, score = ens.predict_scored(w, 0.0, earlier_rows=np.array([[-1], [0], [1], [2]]))
        >>> bool(np.array_equal(score, ens.online_vote(w))), bool(np.array_equal(out.warn, ens.predict_windows(w).warn))
        (True, True)
        """
        w = np.asarray(windows, dtype=float)
        if w.ndim != 3 or w.shape[1] != self.history_steps:
            raise ValueError(f"windows must be (N, {self.history_steps}, {len(self.sensors)}), got shape {w.shape}")
        out = self.predict_batch(self._features(w, 0))
        latest = np.asarray(out.vote_probability, float)
        known = np.full((latest.size, max(self.persistence - 1, 0)), np.nan) if earlier is None else \
            np.array(earlier, float)
        if earlier_rows is not None and known.size:
            rows = np.asarray(earlier_rows, int)
            fill = np.isnan(known) & (rows >= 0)
            known[fill] = latest[rows[fill]]
        score = self.vote_score(w, latest, floor, known)
        with np.errstate(invalid="ignore"):
            warn = score >= self.threshold if self.vote == "lstm" else out.warn & ~_node_down(w)
        return out._replace(warn=np.asarray(warn, bool)), score

    def vote_score(self, windows: np.ndarray, latest: np.ndarray, floor: float,
                   earlier: np.ndarray | None = None) -> np.ndarray:
        """:meth:`online_vote` where it reaches ``floor``, from the latest histories' votes ``latest``
        (``vote_probability`` of :meth:`predict_windows`); below ``floor`` some vote under it.
        ``earlier`` ``(N, persistence − 1)``: the latest votes of the histories ending 1, 2… steps
        before, where already known (NaN: not known); those are not scored again.

        Earlier histories are scored only for the rows still at or above ``floor``, so each row's
        value depends on that row alone (not on the batch it came in): a threshold never below
        ``floor`` (the budget controller's) warns where :meth:`online_vote` would.  NaN where the
        history holds a step with no sensor.

        >>> import numpy as np
        >>> ens = FailureEnsemble.untrained(seed=0)
        >>> ens.persistence = 2
        >>> w = np.random.default_rng(0).normal(size=(5, ens.history_steps, 10))
        >>> latest = ens.predict_windows(w).vote_probability
        >>> s, exact = ens.vote_score(w, latest, floor=0.0), ens.online_vote(w)
        >>> bool(np.allclose(s, exact)), bool(np.allclose(ens.vote_score(w[:2], latest[:2], 0.0), s[:2]))
        (True, True)
        >>> known = ens.vote_probabilities(ens.network_probabilities(ens._features(w, 1)))[:, None]
        >>> bool(np.array_equal(ens.vote_score(w, latest, 0.0, earlier=known), s, equal_nan=True))
        True
        """
        w = np.asarray(windows, dtype=float)
        low = np.asarray(latest, float).copy()
        rows = np.flatnonzero(low >= floor)
        known = np.full((low.size, max(self.persistence - 1, 0)), np.nan) if earlier is None else \
            np.asarray(earlier, float)
        for back in range(1, self.persistence):   # earlier histories, latest first, only where it matters
            if rows.size == 0:
                break
            votes = known[rows, back - 1]
            todo = np.isnan(votes)
            if todo.any():
                votes = votes.copy()
                votes[todo] = self.vote_probabilities(self.network_probabilities(self._features(w[rows[todo]], back)))
            low[rows] = np.minimum(low[rows], votes)
            rows = rows[low[rows] >= floor]
        return np.where(_node_down(w), np.nan, low)

    def series_votes(self, series: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """:meth:`online_vote` of the histories of one node's ``(steps, S)`` series that end
        (exclusive) at ``ends``, each window's features computed once however many networks
        and persistence steps read it: the offline scan's way to the worker's numbers.

        >>> import numpy as np
        >>> ens = FailureEnsemble.untrained(seed=0)
        >>> ens.persistence, ens.lead_shift = 2, True
        >>> x = np.random.default_rng(1).normal(size=(80, 10))
        >>> ends = np.arange(ens.history_steps, 81)
        >>> each = ens.online_vote(np.stack([x[e - ens.history_steps:e] for e in ends]))
        >>> bool(np.array_equal(ens.series_votes(x, ends), each))
        True
        """
        x = np.asarray(series, dtype=float)
        e = np.asarray(ends, int)
        if x.ndim != 2 or x.shape[1] != len(self.sensors):
            raise ValueError(f"series must be (steps, {len(self.sensors)}), got shape {x.shape}")
        if e.size and (e.min() < self.history_steps or e.max() > x.shape[0]):
            raise ValueError(f"history ends must lie in [{self.history_steps}, {x.shape[0]}]")
        h = self.feature_set.history_steps
        shifts = np.asarray(self.shift_steps)
        # every window a network reads for some end and persistence step, once: window ends (exclusive)
        read = e[:, None, None] - np.arange(self.persistence)[None, :, None] - shifts[None, None, :]
        unique, where = np.unique(read, return_inverse=True)
        windows = np.lib.stride_tricks.sliding_window_view(x, h, axis=0)[unique - h].transpose(0, 2, 1)
        probs = self.network_probabilities(self.feature_set(windows))                  # (windows, networks)
        per = probs[where.reshape(read.shape), np.arange(shifts.size)]                 # (ends, persistence, networks)
        votes = self.vote_probabilities(per.reshape(-1, shifts.size)).reshape(e.size, self.persistence).min(axis=1)
        # a history holding a step with no sensor never warns (as in predict_windows)
        dead = np.concatenate([[0], np.cumsum(np.isnan(x).all(axis=1))])
        return np.where(dead[e] - dead[e - self.history_steps] > 0, np.nan, votes)

    def _history(self, w: np.ndarray, back: int) -> np.ndarray:
        """The feature set's history ending ``back`` steps before the newest step."""
        end = w.shape[1] - back
        return w[:, end - self.feature_set.history_steps:end]

    def _features(self, w: np.ndarray, back: int) -> np.ndarray:
        """The networks' inputs for the histories ending ``back`` steps before the newest step:
        ``(N, F)`` when every network reads the same history, else ``(N, networks, F)`` with
        network ``i`` reading the one ``shift_steps[i]`` steps earlier (one feature-set call)."""
        shifts = self.shift_steps
        if not any(shifts):
            return self.feature_set(self._history(w, back))
        stacked = np.concatenate([self._history(w, back + s) for s in shifts])   # network-major rows
        return self.feature_set(stacked).reshape(len(shifts), w.shape[0], -1).transpose(1, 0, 2)

    def _lowest_vote(self, w: np.ndarray, latest: np.ndarray, floor: float | None = None) -> np.ndarray:
        """Lowest LSTM vote of the last ``persistence`` histories.  With ``floor``, earlier
        histories are skipped once every vote is below it (the result then is only known
        to be below ``floor``: enough to decide a warning, as the worker does)."""
        low = np.asarray(latest, float).copy()
        for back in range(1, self.persistence):   # earlier histories, latest first
            if floor is not None and not (low >= floor).any():
                break
            earlier = self.vote_probabilities(self.network_probabilities(self._features(w, back)))
            low = np.minimum(low, earlier)
        return low

    # -- state -----------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """Plain-dict state: ``config`` (JSON-able) and ``weights`` (torch state dicts)."""
        config = {
            "kind": MODEL_KIND, "format_version": FORMAT_VERSION, "version": self.version,
            "leads_minutes": list(self.leads), "sequence": list(self.sequence),
            "grid_s": self.grid_s, "window_steps": self.window_steps,
            "features": self.feature_set.name, "history_steps": self.history_steps,
            "persistence": self.persistence, "lead_shift": self.lead_shift,
            "feature_names": list(self.feature_set.feature_names),
            "window_s": self.grid_s * self.window_steps, "sensors": list(self.sensors),
            "statistics": list(self.feature_set.statistics), "vote": self.vote, "n_unanimous": self.n_unanimous,
            "net_threshold": self.net_threshold, "lstm_threshold": self.threshold,
            "imputation_medians": self.medians.tolist(), "norm_mean": self.mean.tolist(),
            "norm_std": self.std.tolist(), "info": self.info, "lead_calibration": self.lead_calibration,
            "architecture": {"network": f"{self.mean.size}-52tanh-2softmax", "voter": "LSTM(1 input x 6 steps, 4 hidden)-2"},
        }
        weights = {"nets": [n.state_dict() for n in self.nets], "voter": self.voter.state_dict()}
        if self.encoder is not None:
            config["architecture"]["encoder"] = self.encoder.architecture
            weights["encoder"] = self.encoder.state_dict()
        return {"config": config, "weights": weights}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "FailureEnsemble":
        try:
            config, weights = state["config"], state["weights"]
            if config.get("kind") != MODEL_KIND:
                raise ValueError(f"not a failure-ensemble state (kind={config.get('kind')!r})")
            name, stored = config.get("features", "paper"), config.get("statistics")
            encoder = None
            if name == "conv":
                encoder = SequenceEncoder(channels=tuple(config["architecture"]["encoder"]["channels"]))
                encoder.load_state_dict(weights["encoder"])
            elif name == "trees":
                encoder = BoostedTrees.from_state_dict(weights["encoder"])
            current = _LEARNED[name][1](encoder).statistics if encoder is not None else feature_set(name).statistics
            if stored is not None and tuple(stored) != current:
                # the feature set changed since training: the networks' inputs would not line up
                raise ValueError(f"the model was trained on another version of feature set {name!r} "
                                 f"({len(stored)} statistics per sensor, this version computes {len(current)}): "
                                 "retrain it with hpcguard train failure")
            n_inputs = len(config["norm_mean"])
            nets = [LeadNetwork(lead, n_inputs=n_inputs) for lead in config["leads_minutes"]]
            for net, sd in zip(nets, weights["nets"], strict=True):
                net.load_state_dict(sd)
            voter = LstmVoter()
            voter.load_state_dict(weights["voter"])
            return cls(nets, voter, np.asarray(config["imputation_medians"]), np.asarray(config["norm_mean"]),
                       np.asarray(config["norm_std"]), threshold=config["lstm_threshold"], vote=config["vote"],
                       n_unanimous=config["n_unanimous"], net_threshold=config["net_threshold"],
                       grid_s=config["grid_s"], window_steps=config["window_steps"],
                       sensors=tuple(config["sensors"]), version=config["version"], info=config.get("info"),
                       features=config.get("features", "paper"), persistence=config.get("persistence", 1),
                       encoder=encoder, lead_shift=config.get("lead_shift", False),
                       lead_calibration=config.get("lead_calibration"))
        except (KeyError, TypeError, RuntimeError) as exc:
            raise ValueError(f"invalid failure-ensemble state: {exc}") from exc
