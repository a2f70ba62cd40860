"""Classification rates and the unnecessary-checkpoint probability UC (seed 000 §4.1).

A failure prediction system (FPS) runs on every node of a job; the job is
checkpointed as soon as any node predicts a failure.  Classical rates (tpr, fpr,
ppv, ...) describe one node; UC(n) (seed 000 Eq. 4.4) is the probability that a job
on ``n`` nodes suffers at least one false alarm::

    S(f+) = P(K)·fpr    S(t+) = P(E)·tpr    S(f−) = P(E)·fnr    S(t−) = P(K)·tnr   (Eq. 4.2)
    UC(n) = Σ_{x=1..n} C(n, x) S(f+)^x S(t−)^(n−x)                                 (Eq. 4.4)

By the binomial theorem UC(n) = (S(f+) + S(t−))^n − S(t−)^n = P(K)^n (1 − (1 − fpr)^n)
with tnr = 1 − fpr; it is evaluated in log space (``log1p``/``expm1``) so it stays exact
for fpr down to 1e-12 and n up to 2^18 and beyond.

Example
-------
>>> round(float(uc_probability(0.00156, 1024)), 4)      # RWTH Aachen row of Tab. 4.1
0.7978
>>> uc_crossing(0.00004, 0.5)                           # nodes where UC reaches 50 %
17329
>>> rates([1, 1, 0, 0], [1, 0, 0, 1])["tpr"]
0.5
"""
from __future__ import annotations

import numpy as np

MOGON_P_OK = 0.9999900347  # P(K), seed 000 Eq. 4.1
MOGON_P_FAIL = 0.0000099653  # P(E), seed 000 Eq. 4.1


def _check_probability(name: str, value: np.ndarray) -> np.ndarray:
    v = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(v)) or np.any((v < 0) | (v > 1)):
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return v


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, NaN where the denominator is zero (a rate with no events).

    >>> ratio(3, 4), ratio(0, 0)
    (0.75, nan)
    """
    return numerator / denominator if denominator else float("nan")


def confusion(y_true, y_pred) -> dict[str, int]:
    """Counts ``tp, fp, tn, fn`` of binary labels (1 = failure)."""
    t = np.asarray(y_true).astype(bool).ravel()
    p = np.asarray(y_pred).astype(bool).ravel()
    if t.shape != p.shape:
        raise ValueError(f"y_true and y_pred differ in length: {t.size} vs {p.size}")
    return {"tp": int(np.sum(t & p)), "fp": int(np.sum(~t & p)),
            "tn": int(np.sum(~t & ~p)), "fn": int(np.sum(t & ~p))}


def rates(y_true, y_pred) -> dict[str, float]:
    """tpr (recall), fpr, tnr, fnr, ppv (precision) and fdr = 1 − ppv.

    A rate whose denominator is zero is NaN (e.g. ppv with no positive prediction).

    >>> r = rates([1, 0, 0, 0], [1, 1, 0, 0])
    >>> (r["tpr"], round(r["fpr"], 3), r["ppv"])
    (1.0, 0.333, 0.5)
    """
    c = confusion(y_true, y_pred)
    ppv = ratio(c["tp"], c["tp"] + c["fp"])
    return {"tpr": ratio(c["tp"], c["tp"] + c["fn"]), "fpr": ratio(c["fp"], c["fp"] + c["tn"]),
            "tnr": ratio(c["tn"], c["fp"] + c["tn"]), "fnr": ratio(c["fn"], c["tp"] + c["fn"]),
            "ppv": ppv, "fdr": 1.0 - ppv if ppv == ppv else float("nan")}


def roc(y_true, scores, sample_weight=None) -> dict[str, np.ndarray | float]:
    """ROC curve and AUC (scikit-learn): ``fpr``, ``tpr``, ``thresholds`` arrays and ``auc``;
    ``sample_weight`` weighs each event (e.g. the node-steps a drawn healthy event stands for)."""
    from sklearn.metrics import roc_auc_score, roc_curve

    t = np.asarray(y_true).astype(int).ravel()
    s = np.asarray(scores, dtype=float).ravel()
    if t.size != s.size:
        raise ValueError(f"y_true and scores differ in length: {t.size} vs {s.size}")
    if np.unique(t).size < 2:
        raise ValueError("ROC needs both classes (failures and ok events) in y_true")
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=float).ravel()
    fpr, tpr, thr = roc_curve(t, s, drop_intermediate=False, sample_weight=w)
    return {"fpr": fpr, "tpr": tpr, "thresholds": thr, "auc": float(roc_auc_score(t, s, sample_weight=w))}


def sample_probabilities(tpr: float, fpr: float, p_ok: float = 1.0) -> dict[str, float]:
    """Sample probabilities of Eq. 4.2: S(f+), S(t+), S(f−), S(t−) with P(E) = 1 − P(K).

    ``p_ok`` = P(K) defaults to 1.0 (every sampled event is an ok event, the worst case for
    false alarms); MOGON I measured ``MOGON_P_OK``.

    >>> s = sample_probabilities(0.99, 0.01, p_ok=MOGON_P_OK)      # Eq. 4.3
    >>> round(s["s_fp"], 6), round(s["s_tp"], 12)
    (0.01, 9.865647e-06)
    """
    tpr_, fpr_, pk = (float(_check_probability(n, v)) for n, v in (("tpr", tpr), ("fpr", fpr), ("p_ok", p_ok)))
    pe = 1.0 - pk
    return {"s_fp": pk * fpr_, "s_tp": pe * tpr_, "s_fn": pe * (1.0 - tpr_), "s_tn": pk * (1.0 - fpr_)}


def uc_probability(fpr, nodes, p_ok: float = 1.0) -> np.ndarray | float:
    """UC(n) of Eq. 4.4: probability of at least one false alarm among ``nodes`` nodes.

    ``fpr`` and ``nodes`` broadcast against each other (vectorised over node counts).
    Closed form ``P(K)^n · (1 − (1 − fpr)^n)`` computed as
    ``exp(n·log P(K)) · (−expm1(n·log1p(−fpr)))``.

    >>> uc_probability(0.0001, [1, 1024, 2**18]).round(4).tolist()
    [0.0001, 0.0973, 1.0]
    """
    f = _check_probability("fpr", fpr)
    pk = float(_check_probability("p_ok", p_ok))
    n = np.asarray(nodes, dtype=float)
    if np.any(n < 0) or np.any(n != np.floor(n)):
        raise ValueError(f"nodes must be non-negative integers, got {nodes!r}")
    with np.errstate(divide="ignore"):
        log_pk = np.log(pk) if pk > 0 else -np.inf
        log_tn = np.log1p(-f)  # -inf when fpr == 1
    keep = np.where(n == 0, 1.0, np.exp(n * log_pk)) if pk < 1 else np.ones_like(n)
    with np.errstate(invalid="ignore"):
        any_fp = np.where(n == 0, 0.0, -np.expm1(n * log_tn))
    out = keep * any_fp
    return float(out) if out.ndim == 0 else out


def uc_crossing(fpr: float, level: float, p_ok: float = 1.0, max_nodes: int = 2**40) -> int | None:
    """Smallest node count ``n`` with UC(n) ≥ ``level``; ``None`` if never reached up to ``max_nodes``.

    With P(K) < 1, UC(n) first rises and then falls, so a level may never be reached.

    >>> uc_crossing(0.01, 0.9), uc_crossing(1.0, 0.9)
    (230, 1)
    """
    f = float(_check_probability("fpr", fpr))
    lv = float(_check_probability("level", level))
    if lv <= 0:
        return 0
    if f == 0:
        return None
    if f >= 1.0 and p_ok >= 1.0:  # every node raises a false alarm
        return 1
    if p_ok >= 1.0:  # closed form: 1 − (1 − f)^n ≥ level  ⇔  n ≥ log1p(−level) / log1p(−f)
        if lv >= 1.0:
            return None
        n = int(np.ceil(np.log1p(-lv) / np.log1p(-f) - 1e-9))
        n = max(n, 1)
        while n > 1 and uc_probability(f, n - 1) >= lv:  # guard float rounding at the boundary
            n -= 1
        while uc_probability(f, n) < lv:
            n += 1
        return n if n <= max_nodes else None
    grid = np.unique(np.round(np.logspace(0, np.log10(max_nodes), 4000)).astype(np.int64))
    uc = uc_probability(f, grid, p_ok)
    hit = np.flatnonzero(uc >= lv)
    if hit.size == 0:
        return None
    hi = int(grid[hit[0]])
    lo = int(grid[hit[0] - 1]) if hit[0] > 0 else 0
    while hi - lo > 1:  # UC is unimodal; below its peak it increases, so bisect
        mid = (lo + hi) // 2
        if uc_probability(f, mid, p_ok) >= lv:
            hi = mid
        else:
            lo = mid
    return hi


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (scipy's ``binomtest``); ``(nan, nan)`` with no trials.

    >>> tuple(round(x, 3) for x in wilson_interval(30, 40))
    (0.598, 0.858)
    """
    if trials <= 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(int(successes), int(trials)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def poisson_interval(count: int, exposure: float, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson rate ``count / exposure`` (scipy's ``chi2``);
    ``(nan, nan)`` with no exposure.  How far a rate measured from a few events, such as
    false-alarm episodes per 100 node-days, may lie from the site's true one.

    >>> tuple(round(100 * x, 2) for x in poisson_interval(5, 256.0))     # 5 episodes in 256 node-days
    (0.63, 4.56)
    >>> poisson_interval(0, 100.0)[0]
    0.0
    """
    if exposure <= 0:
        return float("nan"), float("nan")
    from scipy.stats import chi2

    alpha = 1.0 - confidence
    low = 0.0 if count <= 0 else chi2.ppf(alpha / 2, 2 * int(count)) / 2.0
    high = chi2.ppf(1.0 - alpha / 2, 2 * int(count) + 2) / 2.0
    return float(low / exposure), float(high / exposure)


def effective_count(weights) -> float:
    """Kish's effective number of draws of a weighted sample, ``(Σw)² / Σw²``: what a rate over
    events weighed by the node-steps each stands for is worth in uniform draws (0 when empty).

    >>> effective_count([1.0] * 10), round(effective_count([10.0] * 5 + [1.0] * 5), 2)
    (10.0, 5.99)
    """
    w = np.asarray(weights, dtype=float).ravel()
    square = float((w ** 2).sum())
    return float(w.sum() ** 2 / square) if square > 0 else 0.0


def design_effects(scores, weights, clusters, thresholds) -> np.ndarray:
    """The design effect of a weighted count of events over each threshold when the events come in
    clusters: ``Σ_j s_j² / Σ_i w_i²`` over the events scoring ``>= t``, with ``s_j`` the weight of
    cluster ``j`` over ``t`` (1 where no event is over ``t``; ≥ 1).  False positives that come in
    episodes (one node's look-alike scoring high for minutes) vary like a count of episodes, not of
    events: the count's variance is this many times the independent draws' (quasi-Poisson), so a
    rate's bound rests on its effective number of trials over it.  Vectorised over the thresholds.

    >>> design_effects([0.9, 0.8, 0.7, 0.2], [1.0] * 4, [0, 0, 1, 2], [0.85, 0.75, 0.5])   # 1; 2²/2; (2² + 1)/3
    array([1.        , 2.        , 1.66666667])
    >>> design_effects([0.9, 0.8], [1.0, 1.0], [0, 1], [0.95, 0.5])        # none over it; two clusters of one
    array([1., 1.])
    """
    s = np.asarray(scores, dtype=float).ravel()
    w = np.asarray(weights, dtype=float).ravel()
    if s.size == 0:
        return np.ones(np.shape(thresholds))
    _, group = np.unique(np.asarray(clusters).ravel(), return_inverse=True)
    order = np.argsort(-s, kind="stable")
    s, w, group = s[order], w[order], group[order]
    # each event's cluster weight before it joins (in descending score order): Σ s_j² grows by 2·before·w + w²
    by = np.lexsort((np.arange(s.size), group))
    cum = np.cumsum(w[by])
    first = np.r_[True, group[by][1:] != group[by][:-1]]
    start = np.maximum.accumulate(np.where(first, cum - w[by], 0.0))
    before = np.empty_like(w)
    before[by] = cum - w[by] - start
    cluster_sq, own_sq = np.cumsum(2 * before * w + w * w), np.cumsum(w * w)
    over = np.searchsorted(-s, -np.asarray(thresholds, dtype=float), side="right")   # events scoring >= t
    with np.errstate(invalid="ignore", divide="ignore"):
        effect = np.where(over > 0, cluster_sq[np.maximum(over - 1, 0)] / own_sq[np.maximum(over - 1, 0)], 1.0)
    return np.where(np.isfinite(effect), np.maximum(effect, 1.0), 1.0)


def history_design_effects(scores, weights, histories, thresholds) -> np.ndarray:
    """The design effect of a weighted false-positive rate over each threshold when the events come
    from several histories (recordings, sites): the spread of the histories' own rates around the
    pooled one, ``J/(J−1) Σ_j (s_j − n_j p)²``, over the binomial variance ``p (1 − p) Σ_i w_i²``
    (``s_j``: history ``j``'s weight over ``t``, ``n_j``: its weight, ``p = Σ s_j / Σ n_j``; ≥ 1).
    A rate that rests on one history's episode (the other histories clean) is as uncertain as a
    count of histories, not of draws; histories that agree leave it at 1.  1 with fewer than two
    histories or no event over ``t``.  Vectorised over the thresholds.

    >>> h = np.repeat([0, 1, 2, 3], 1000)                     # four histories of 1,000 draws
    >>> s = np.zeros(4000); s[[10, 1010, 2010, 3010]] = 1.0     # one false positive in each
    >>> history_design_effects(s, np.ones(4000), h, [0.5])      # they agree: binomial
    array([1.])
    >>> s = np.zeros(4000); s[:4] = 1.0                          # all four in one history
    >>> history_design_effects(s, np.ones(4000), h, [0.5]).round(2)
    array([4.])
    """
    s = np.asarray(scores, dtype=float).ravel()
    w = np.asarray(weights, dtype=float).ravel()
    t = np.asarray(thresholds, dtype=float)
    _, group = np.unique(np.asarray(histories).ravel(), return_inverse=True)
    n_hist = int(group.max()) + 1 if group.size else 0
    if n_hist < 2:
        return np.ones(t.shape)
    over_weight = np.empty((t.size, n_hist))                     # (T, J): each history's weight over t
    for j in range(n_hist):
        mine = group == j
        order = np.argsort(-s[mine], kind="stable")
        cum = np.r_[0.0, np.cumsum(w[mine][order])]
        over_weight[:, j] = cum[np.searchsorted(-s[mine][order], -t.ravel(), side="right")]
    n_j = np.bincount(group, weights=w, minlength=n_hist)
    p = over_weight.sum(axis=1) / n_j.sum()
    spread = n_hist / (n_hist - 1) * ((over_weight - n_j[None, :] * p[:, None]) ** 2).sum(axis=1)
    binomial = p * (1 - p) * (w * w).sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        effect = np.where(binomial > 0, spread / binomial, 1.0)
    return np.maximum(np.where(np.isfinite(effect), effect, 1.0), 1.0).reshape(t.shape)


def rate_upper_bound(count, trials, confidence: float = 0.95):
    """One-sided exact (Clopper–Pearson) upper bound of a proportion ``count / trials`` (scipy's
    ``beta``); vectorised, and ``count`` may be fractional (a weighted count on an effective number
    of trials).  The highest rate the data leave plausible: a threshold whose bound stays under a
    false-positive ceiling keeps it with that ``confidence``; 1 where there are no trials.

    >>> round(float(rate_upper_bound(0, 10_000)), 6)        # no false positive in 10,000: up to 3e-4
    0.0003
    >>> round(float(rate_upper_bound(13, 129_000)) * 1e4, 2)  # 13 of 129,000 (1.0e-4): up to 1.6e-4
    1.6
    """
    from scipy.stats import beta

    k = np.asarray(count, dtype=float)
    n = np.asarray(trials, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        bound = np.where(k >= n, 1.0, beta.ppf(confidence, k + 1.0, np.maximum(n - k, 1e-12)))
    out = np.where(n > 0, bound, 1.0)
    return float(out) if out.ndim == 0 else out
