"""The learned ``trees`` feature set: gradient-boosted trees over the ``robust`` statistics.

On the site profiles the seed's 52-tanh networks read the 100 ``robust`` statistics and
keep little of what separates a precursor from its look-alike at the far tail (a
memory leak at 95 % against a RAM-filling job's 92 % peak); boosted trees split on
exactly such levels.  This front-end
fits scikit-learn's ``HistGradientBoostingClassifier`` on the ``robust`` statistics of
the training events (failure against healthy and look-alike), keeps its trees as
arrays, and gives the networks its log-odds: each lead network reads the trees' score
of the history ending its lead before the event, and the LSTM voter votes on the six
(docs/results.md measures it).

It is fitted once per model, before the networks, on the events of the networks' period,
each event seen through all six leads' histories (a window 7 minutes before a failure is
labelled a failure too: every lead network reads the trees' score of its own lead, and
drawing one lead per event instead lost a third of the far tail, docs/results.md); the
voter's period is new to it.  One input per network: the trees'
in-sample score of a training failure is more confident than a new one, and a single
monotone input keeps that from reordering anything (several per-sensor scores did: the
networks learnt their in-sample interplay).

Inference walks the stored arrays with numpy (no pickle in a model directory); every
row's score is a sum over the trees in one fixed order, so the worker (a few nodes at a
time) computes exactly what the offline scan (thousands at once) computes.

Example
-------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> h = rng.normal(50, 0.5, (400, 96, 10))
>>> y = (np.arange(400) < 80).astype(np.int8)
>>> h[:80, -16:, 7] = np.linspace(60, 99, 16)        # memory climbing toward 100 % before failures
>>> trees, report = fit_trees(FEATURE_SETS["robust"](h), y, seed=0)
>>> fs = trees_feature_set(trees)
>>> fs.name, fs.history_steps, fs(h[:3]).shape
('trees', 96, (3, 1))
>>> bool(fs(h[:1])[0, 0] > 0 > fs(h[-1:])[0, 0]), report["train_auc"] > 0.99
(True, True)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hpcguard.models.features import FEATURE_SETS, LEARNED_FEATURE_SETS, FeatureSet

HISTORY_STEPS = LEARNED_FEATURE_SETS["trees"]
# healthy events per failure and hard negatives per look-alike the trees are fitted on (as the conv encoder)
OK_PER_FAILURE, PER_LOOK_ALIKE = 20, 6
N_TREES, LEARNING_RATE, MAX_LEAF_NODES, MIN_SAMPLES_LEAF = 200, 0.05, 15, 20
# a leaf holds at least this share of the rows fitted on (and MIN_SAMPLES_LEAF): with a site's
# history plus 24 simulated ones (~320,000 rows) leaves of 320 rows rank the far tail better on
# two sets of test histories and keep the vote's fpr ceiling on both (docs/results.md, "Leaves of
# a thousandth of the rows")
MIN_LEAF_SHARE = 1e-3
_FIELDS = ("feature", "threshold", "missing_left", "left", "right", "leaf", "value")


class BoostedTrees:
    """Fitted boosted trees as flat node arrays; :meth:`decision_function` is the log-odds.

    ``roots[t]`` indexes tree ``t``'s root in the node arrays; a node goes to ``left`` when
    its feature is ``<= threshold`` (or missing and ``missing_left``), else ``right``;
    ``value`` is a leaf's contribution; ``baseline`` the prior log-odds.
    """

    def __init__(self, feature, threshold, missing_left, left, right, leaf, value, roots, baseline: float):
        self.feature = np.asarray(feature, np.int64)
        self.threshold = np.asarray(threshold, float)
        self.missing_left = np.asarray(missing_left, bool)
        self.left = np.asarray(left, np.int64)
        self.right = np.asarray(right, np.int64)
        self.leaf = np.asarray(leaf, bool)
        self.value = np.asarray(value, float)
        self.roots = np.asarray(roots, np.int64)
        self.baseline = float(baseline)
        self._check()

    def _check(self) -> None:
        """Refuse arrays a walk could leave or loop in (a damaged or hand-made model file)."""
        n = self.feature.size
        if any(getattr(self, f).shape != (n,) for f in _FIELDS) or self.roots.ndim != 1 or not self.roots.size:
            raise ValueError("boosted trees: node arrays of different lengths, or no tree")
        ends = np.append(self.roots[1:], n)
        if self.roots[0] != 0 or np.any(ends <= self.roots):
            raise ValueError("boosted trees: tree roots out of order")
        tree_end = np.repeat(ends, ends - self.roots)
        inner = ~self.leaf
        idx = np.arange(n)
        # children come after their parent inside its tree (scikit-learn's order): every walk ends
        if np.any(inner & ((self.left <= idx) | (self.right <= idx) | (self.left >= tree_end)
                           | (self.right >= tree_end) | (self.feature < 0)
                           | (self.feature >= len(FEATURE_SETS["robust"].feature_names)))):
            raise ValueError("boosted trees: a split points outside its tree or to an unknown input")
        if not np.all(np.isfinite(self.value[self.leaf])) or not np.isfinite(self.baseline):
            raise ValueError("boosted trees: a leaf value is not finite")

    @classmethod
    def from_sklearn(cls, model) -> "BoostedTrees":
        """The trees of a fitted binary ``HistGradientBoostingClassifier`` (numerical features)."""
        parts, roots, offset = [], [], 0
        for (predictor,) in model._predictors:
            nodes = predictor.nodes
            if nodes["is_categorical"].any():
                raise ValueError("categorical splits are not supported")
            parts.append(nodes)
            roots.append(offset)
            offset += len(nodes)
        nodes = np.concatenate(parts)
        shift = np.repeat(np.asarray(roots), [len(p) for p in parts])
        return cls(nodes["feature_idx"], nodes["num_threshold"], nodes["missing_go_to_left"],
                   nodes["left"] + shift, nodes["right"] + shift, nodes["is_leaf"], nodes["value"], roots,
                   float(np.ravel(model._baseline_prediction)[0]))

    def decision_function(self, x: np.ndarray, batch: int = 4096) -> np.ndarray:
        """``(N,)`` log-odds of ``(N, F)`` features (NaN = missing)."""
        x = np.asarray(x, float)
        n_trees = self.roots.size
        out = np.empty(len(x))
        for a in range(0, len(x), batch):
            xb = x[a:a + batch]
            node = np.tile(self.roots, len(xb))                  # row-major (row, tree) slots
            row = np.repeat(np.arange(len(xb)), n_trees)
            walking = np.flatnonzero(~self.leaf[node])           # slots not yet at a leaf
            while walking.size:
                at = node[walking]
                v = xb[row[walking], self.feature[at]]
                go_left = np.where(np.isnan(v), self.missing_left[at], v <= self.threshold[at])
                node[walking] = np.where(go_left, self.left[at], self.right[at])
                walking = walking[~self.leaf[node[walking]]]
            contrib = self.value[node].reshape(len(xb), n_trees)
            total = np.full(len(xb), self.baseline)
            for t in range(n_trees):      # one fixed order per row, whatever the batch
                total += contrib[:, t]
            out[a:a + batch] = total
        return out

    @property
    def architecture(self) -> dict[str, Any]:
        """What a model manifest records of it."""
        return {"kind": "boosted-trees", "inputs": "robust", "trees": int(self.roots.size),
                "nodes": int(self.feature.size)}

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors (a model directory's weights file holds tensors only)."""
        arrays = {f: getattr(self, f) for f in _FIELDS}
        arrays["roots"] = self.roots
        arrays["baseline"] = np.array([self.baseline])
        arrays["n_inputs"] = np.array([len(FEATURE_SETS["robust"].feature_names)])  # what the splits index
        return {k: torch.from_numpy(np.asarray(v).copy()) for k, v in arrays.items()}

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor]) -> "BoostedTrees":
        """The trees of :meth:`state_dict`; refused when fitted on another version of the ``robust`` statistics
        (their splits would read other inputs)."""
        a = {k: v.numpy() for k, v in state.items()}
        current = len(FEATURE_SETS["robust"].feature_names)
        fitted = int(a["n_inputs"][0]) if "n_inputs" in a else 90  # models before the inputs were recorded: 90
        if fitted != current:
            raise ValueError(f"the trees were fitted on another version of the robust statistics ({fitted} inputs, "
                             f"this version computes {current}): retrain the model with hpcguard train failure")
        return cls(*(a[f] for f in _FIELDS), a["roots"], float(a["baseline"][0]))


def trees_feature_set(trees: BoostedTrees) -> FeatureSet:
    """The ``trees`` :class:`FeatureSet` of fitted trees (what a model's networks read)."""
    robust = FEATURE_SETS["robust"]

    def transform(windows: np.ndarray) -> np.ndarray:
        w = np.asarray(windows, dtype=float)
        flat = robust(w.reshape(-1, *w.shape[-2:]))
        return trees.decision_function(flat).reshape(*w.shape[:-2], 1)

    return FeatureSet("trees", HISTORY_STEPS, transform, ("log_odds",), "gradient-boosted trees over the robust "
                      f"statistics ({len(robust.feature_names)} inputs), fitted with the model: their log-odds",
                      names=("trees.log_odds",))


def fit_trees(statistics: np.ndarray, labels: np.ndarray, seed: int = 0) -> tuple[BoostedTrees, dict[str, Any]]:
    """Fit boosted trees on the ``robust`` statistics of events, ``(N, 160)`` or ``(N, leads, 160)``
    (each event seen through several leads' histories, all with its label); NaN = missing.

    scikit-learn's ``HistGradientBoostingClassifier``: ``N_TREES`` trees of at most
    ``MAX_LEAF_NODES`` leaves, each leaf holding at least ``MIN_LEAF_SHARE`` of the rows (and
    ``MIN_SAMPLES_LEAF``), no early stopping (the number of trees is fixed), seeded.
    The report counts ``events``, their ``failures`` and the ``histories`` fitted on.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score

    events = np.asarray(labels).astype(int)
    stats = np.asarray(statistics, dtype=float)
    n_inputs = len(FEATURE_SETS["robust"].feature_names)
    if stats.ndim not in (2, 3) or stats.shape[-1] != n_inputs:
        raise ValueError(f"the trees read the robust statistics (N, {n_inputs}) or (N, leads, {n_inputs}), "
                         f"got shape {stats.shape}")
    if len(events) != len(stats) or events.sum() < 2 or (events == 0).sum() < 2:
        raise ValueError(f"the trees need failures and healthy events: {int(events.sum())} failures, "
                         f"{int((events == 0).sum())} healthy of {len(events)}")
    x = stats.reshape(-1, n_inputs)
    y = np.repeat(events, x.shape[0] // len(events))
    min_leaf = max(MIN_SAMPLES_LEAF, round(MIN_LEAF_SHARE * len(y)))
    model = HistGradientBoostingClassifier(max_iter=N_TREES, learning_rate=LEARNING_RATE,
                                           max_leaf_nodes=MAX_LEAF_NODES, min_samples_leaf=min_leaf,
                                           early_stopping=False, random_state=seed).fit(x, y)
    trees = BoostedTrees.from_sklearn(model)
    scores = trees.decision_function(x)
    diff = float(np.abs(scores - model.decision_function(x)).max())
    if diff > 1e-6:   # the export reads scikit-learn's tree arrays: a layout it no longer has must not pass
        raise ValueError(f"the exported trees score {diff:.3g} away from scikit-learn's own: unsupported version")
    return trees, {"events": int(len(events)), "failures": int(events.sum()), "histories": int(len(y)),
                   "min_samples_leaf": int(min_leaf),
                   "trees": int(trees.roots.size),
                   "train_auc": float(roc_auc_score(y, scores)),
                   "max_abs_diff_sklearn": diff}
