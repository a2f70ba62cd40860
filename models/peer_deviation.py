"""Label-free scores: how far a node is from its own past *at the same load* and from its peers (issue 57).

A failure physics nobody listed still leaves one general clue: the node behaves unlike its own
past and unlike the nodes that share its rack, hardware and job.  Two scores live here.

:func:`load_peer_deviations` (the second try, docs/research/2026-12-07-label-free-load-and-job-peers.md),
per node, sensor and step, causal (a step uses only itself and earlier steps), no labels, no training:

* **own past at the same load** — an exponentially weighted least-squares fit (half-life
  ``halflife_steps``) of each hardware sensor and of ``load_1min`` on the node's lagged
  utilisation (``cpu_user`` through a 60 s exponential lag, the way temperatures and the
  kernel's 1-min load follow it); ``cpu_user``, ``mem_usage`` and the network bytes (log) are
  fitted within the running job instead (the fit restarts at a job change and learns nothing
  in the job's first ``job_settle`` steps); ``disk_usage`` is taken as its 1-min change.  The
  residual is the reading less the fit's prediction from the steps before;
* **peers** — the hardware sensors' residuals less the median residual of the nodes in the same
  rack and hardware generation (a rack's inlet drift and the site's daily cycle are not the
  node's), the workload sensors' residuals less the median of the nodes running the same job
  at that step (a job's own phases are not an anomaly); a group needs 3 nodes with a reading;
* **the node's own spread** — the residual over its exponentially weighted mean absolute size,
  kept per load bin (idle, part, full, and a transient bin while the utilisation moves or
  after a missing sample), floored at ``floor_share`` of the sensor's typical spread over
  nodes and at half the sensor's resolution (a quantised reading's run of equal values is no
  zero spread); updated with the residual winsorised at ``clip`` spreads, so an anomaly
  neither becomes normal at once nor locks the node out;
* **per family** — the largest ``|z|`` over the family's sensors (:data:`FAMILIES`: thermal,
  power, load, memory, disk, network), averaged over ``smooth_steps``.

:func:`family_vote_score` then puts each family on its own scale (:func:`calibrated`: over its
running 99.9th percentile over all nodes and past steps, recomputed hourly) and takes the
largest over the families that vote (:data:`VOTE_FAMILIES`).  :func:`vote_of` maps a score into
(0, 1) monotonically for the budget controller (:mod:`hpcguard.models.budget`).

:func:`deviation_scores` is the first try (own exponentially weighted past and hardware peers,
the largest over sensors): on six randomised sites it warned 3 of 226 precursor failures within
the budget (docs/research/2026-12-06-label-free-deviation-score.md).  The second try warned 9 of 235
on six fresh sites (median site 0 %, 1 of 6 within the budget; 10 of 66 on the sites it was shaped
on): the look-alikes share the precursors' physics and the load family keeps a healthy tail of its
own (docs/research/2026-12-07-label-free-load-and-job-peers.md).  Neither is wired into the worker;
``benchmarks/label_free_sites.py`` measures both.

Offline and vectorised over nodes and sensors; the loops run over steps only.

Example
-------
Eight nodes whose temperature follows their load; two jobs start and end (the load and the
temperature jump: not an anomaly), then node 3 heats up at an unchanged load:

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> n, t = 8, 600
>>> util = np.full((n, t), 0.02)
>>> util[:4, 200:400] = 0.9; util[4:, 300:500] = 0.6           # two jobs of four nodes
>>> jobs = np.zeros((n, t), int); jobs[:4, 200:400] = 7; jobs[4:, 300:500] = 8
>>> lag = np.zeros_like(util)
>>> for k in range(1, t):
...     lag[:, k] = lag[:, k - 1] + 0.22 * (util[:, k] - lag[:, k - 1])
>>> x = np.full((n, t, len(SENSORS)), np.nan)
>>> x[..., SENSORS.index("cpu_user")] = 100 * util + rng.normal(0, 0.5, (n, t))
>>> x[..., SENSORS.index("cpu_temp")] = 40 + 25 * lag + rng.normal(0, 0.3, (n, t))
>>> x[3, 560:, SENSORS.index("cpu_temp")] += np.linspace(2, 8, 40)   # node 3 overheats, load unchanged
>>> fam = load_peer_deviations(x, jobs=jobs, warmup_steps=60, halflife_steps=240)
>>> th = fam["thermal"]
>>> bool(np.nanmax(th[:, 150:550]) < 8), int(np.nanargmax(th[:, -1])), bool(th[3, -1] > 20)
(True, 3, True)
"""
from __future__ import annotations

import warnings

import numpy as np


def deviation_scores(values: np.ndarray, groups=None, halflife_steps: float = 240.0, warmup_steps: int = 240,
                     smooth_steps: int = 4, rel_floor: float = 0.002, clip: float = 3.0) -> np.ndarray:
    """Scores ``(nodes, steps)`` of ``values (nodes, steps, sensors)`` (NaN = missing); NaN where a node
    has no reading or is still warming up. ``groups``: a peer-group label per node (None: one group)."""
    v = np.asarray(values, dtype=float)
    n, t, s = v.shape
    z_peer = np.full(v.shape, np.nan)
    labels = np.zeros(n, int) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: missing readings are expected
        for g in np.unique(labels):
            members = labels == g
            if members.sum() < 3:  # no peers to speak of: the node's own past decides
                z_peer[members] = np.inf
                continue
            block = v[members]
            med = np.nanmedian(block, axis=0)
            mad = 1.4826 * np.nanmedian(np.abs(block - med), axis=0)
            scale = np.maximum(mad, rel_floor * (np.abs(med) + 1.0))
            z_peer[members] = np.abs(block - med) / scale
        z_self = np.full(v.shape, np.nan)
        alpha = 1.0 - 0.5 ** (1.0 / float(halflife_steps))
        mean = np.full((n, s), np.nan)
        var = np.zeros((n, s))
        seen = np.zeros((n, s), int)
        for k in range(t):  # over steps only: every node and sensor at once
            x = v[:, k]
            ok = ~np.isnan(x)
            sd = np.sqrt(var) + rel_floor * (np.abs(mean) + 1.0)
            z = np.abs(x - mean) / sd
            z_self[:, k] = np.where(ok & (seen >= warmup_steps), z, np.nan)
            first = ok & np.isnan(mean)
            mean = np.where(first, x, mean)
            # why clipped: a deviation the node is in the middle of must not become its new normal at once
            d = np.where(ok, x - mean, 0.0)
            inlier = ok & ((seen < warmup_steps) | (np.abs(d) <= clip * sd))
            mean = mean + alpha * np.where(seen >= warmup_steps, np.clip(d, -clip * sd, clip * sd), d)
            var = np.where(inlier, (1.0 - alpha) * (var + alpha * d * d), var)
            seen += ok
        dev = np.fmin(z_self, z_peer)
        dev = np.where(np.isnan(z_self), np.nan, dev)
        score = np.nanmax(dev, axis=2)
    if smooth_steps > 1:
        filled = np.nan_to_num(score, nan=0.0)
        count = (~np.isnan(score)).astype(float)
        c1 = np.cumsum(filled, axis=1)
        c2 = np.cumsum(count, axis=1)
        pad = np.zeros((n, smooth_steps))
        c1 = np.concatenate([pad, c1], axis=1)
        c2 = np.concatenate([pad, c2], axis=1)
        num = c1[:, smooth_steps:] - c1[:, :-smooth_steps]
        den = c2[:, smooth_steps:] - c2[:, :-smooth_steps]
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.where(np.isnan(score), np.nan, num / den)
    return score


def vote_of(score: np.ndarray, scale: float = 10.0) -> np.ndarray:
    """A score as a vote in (0, 1): ``score / (score + scale)``, monotone; NaN stays NaN.

    >>> vote_of(np.array([0.0, 10.0, np.nan])).tolist()[:2]
    [0.0, 0.5]
    """
    s = np.asarray(score, float)
    return s / (s + float(scale))



# --------------------------------------------------------------------------- the second try (issue 57)
SENSORS: tuple[str, ...] = ("cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp", "load_1min",
                            "cpu_user", "disk_usage", "mem_usage", "bytes_in", "bytes_out")  # the canonical order
FAMILIES: dict[str, tuple[str, ...]] = {
    "thermal": ("cpu_temp", "cpu_fan_rpm"), "power": ("cpu_voltage", "psu_temp"),
    "load": ("load_1min", "cpu_user"), "memory": ("mem_usage",), "disk": ("disk_usage",),
    "network": ("bytes_in", "bytes_out"),
}
# Families that vote by default: on the iteration sites the memory and network residuals still had
# healthy tails as high as any precursor's (job phases the job peers do not remove), disk saw no precursor.
VOTE_FAMILIES: tuple[str, ...] = ("thermal", "power", "load")
ON_LOAD = ("cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp", "load_1min")   # fitted on the lagged load
IN_JOB = ("cpu_user", "mem_usage", "bytes_in", "bytes_out")                      # fitted within the running job
RACK_PEERS = ("cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp")              # less the rack-and-hardware median
JOB_PEERS = ("load_1min", "cpu_user", "mem_usage", "bytes_in", "bytes_out")      # less the job's median
LOG = ("bytes_in", "bytes_out")
CHANGE_STEPS = {"disk_usage": 4}
LOAD_LAG_S = 60.0          # the lag of temperatures and of the 1-min load average behind the utilisation
GRID_S = 15.0


def _group_median(x: np.ndarray, labels: np.ndarray, min_members: int) -> np.ndarray:
    """Per node, the median of ``x (nodes, sensors)`` over the nodes with its label (label < 0: none),
    where at least ``min_members`` of them have a reading; NaN elsewhere."""
    out = np.full(x.shape, np.nan)
    for g in np.unique(labels[labels >= 0]):
        members = labels == g
        if members.sum() < min_members:
            continue
        block = x[members]
        count = (~np.isnan(block)).sum(axis=0)
        med = np.nanmedian(block, axis=0)
        out[members] = np.where(count >= min_members, med, np.nan)[None, :]
    return out


def _prepared(values: np.ndarray, sensors: list[str]) -> np.ndarray:
    """The readings as scored: network bytes as log, disk usage as its change over CHANGE_STEPS."""
    v = np.array(values, dtype=float)
    for name in LOG:
        if name in sensors:
            i = sensors.index(name)
            v[..., i] = np.log1p(np.maximum(v[..., i], 0.0))
    for name, lag in CHANGE_STEPS.items():
        if name in sensors:
            i = sensors.index(name)
            change = np.full(v.shape[:2], np.nan)
            change[:, lag:] = v[:, lag:, i] - v[:, :-lag, i]
            v[..., i] = change
    return v


def load_peer_deviations(values: np.ndarray, sensors=SENSORS, hardware=None, racks=None, jobs=None,
                         halflife_steps: float = 480.0, warmup_steps: int = 120, job_warmup: int = 12,
                         job_settle: int = 12, smooth_steps: int = 8, clip: float = 4.0, cap: float = 2000.0,
                         ridge: float = 1e-4, spread_halflife: float = 1920.0, floor_share: float = 0.3,
                         transient: float = 0.05, families=None, return_z: bool = False):
    """Per family, a score ``(nodes, steps)`` of ``values (nodes, steps, len(sensors))`` (NaN = missing):
    the largest ``|z|`` over the family's sensors, averaged over ``smooth_steps`` (NaN: nothing scored).

    ``sensors`` names the last axis (needs ``cpu_user``; default the canonical ten); ``hardware`` and
    ``racks``: a label per node (None: one group); ``jobs (nodes, steps)``: the job id on each node at
    each step (0: none; None: no job peers, no in-job fits restart).  ``families``: name -> sensors
    (default :data:`FAMILIES`).  ``return_z``: also the signed deviations ``(nodes, steps, sensors)``.
    """
    sensors = list(sensors)
    families = FAMILIES if families is None else families
    v = _prepared(values, sensors)
    n, t, s = v.shape
    iu = sensors.index("cpu_user")
    on_load = np.array([x in ON_LOAD for x in sensors])
    in_job = np.array([x in IN_JOB for x in sensors])
    rack_m = np.array([x in RACK_PEERS for x in sensors], float)
    job_m = np.array([x in JOB_PEERS for x in sensors], float)
    hw = np.zeros(n, int) if hardware is None else np.unique(np.asarray(hardware).astype(str), return_inverse=True)[1]
    rk = np.zeros(n, int) if racks is None else np.unique(np.asarray(racks).astype(str), return_inverse=True)[1]
    place = hw * (int(rk.max()) + 1) + rk
    alpha = 1.0 - np.exp(-GRID_S / LOAD_LAG_S)
    lam = 0.5 ** (1.0 / float(halflife_steps))
    p = 2                                      # intercept, lagged utilisation
    A, b, w = np.zeros((n, s, p, p)), np.zeros((n, s, p)), np.zeros((n, s))
    tiny, shrink = 1e-9 * np.eye(p), np.diag([0.0, 1.0])   # the intercept is not shrunk
    own = np.array([1.0, 0.0])
    bins = np.array([0.15, 0.5])               # idle, part, full; bin 3: transient
    spread, seen = np.full((n, s, 4), np.nan), np.zeros((n, s, 4), int)
    quantum, x_prev = np.full((n, s), np.inf), np.full((n, s), np.nan)
    u_last, lag1, gap, since_back = np.zeros(n), np.zeros(n), np.zeros(n, int), np.full(n, 10 ** 6)
    job_prev, in_job_steps = np.zeros(n, np.int64), np.zeros(n, int)
    z = np.full((n, t, s), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: missing readings are expected
        for k in range(t):  # over steps only: every node and sensor at once
            x = v[:, k]
            u_raw = x[:, iu] / 100.0
            have_u = ~np.isnan(u_raw)
            back = have_u & (gap > 4)                         # back after minutes without samples: the lag restarts
            u = np.where(have_u, u_raw, u_last)
            u_last = u
            lag1 = np.where(back, u, lag1 + alpha * (u - lag1))
            since_back = np.where(have_u & (gap > 0), 0, since_back + 1)
            gap = np.where(have_u, 0, gap + 1)
            phi = np.where(on_load[None, :, None], np.stack([np.ones(n), lag1], axis=1)[:, None, :], own)
            jk = np.zeros(n, np.int64) if jobs is None else np.asarray(jobs[:, k], np.int64)
            jk = np.where(have_u, jk, job_prev)               # no sample: the job is not known to have changed
            changed = jk != job_prev
            job_prev = jk
            in_job_steps = np.where(changed, 0, in_job_steps + 1)
            reset = changed[:, None] & in_job[None, :]
            A = np.where(reset[..., None, None], 0.0, A)
            b = np.where(reset[..., None], 0.0, b)
            w = np.where(reset, 0.0, w)
            # the prediction from the steps before
            beta = np.linalg.solve(A + ridge * w[..., None, None] * shrink + tiny, b[..., None])[..., 0]
            pred = np.einsum("nsp,nsp->ns", phi, beta)
            fit = ((w >= np.where(in_job, job_warmup, 20)[None, :]) & ~np.isnan(x)
                   & (have_u[:, None] | ~on_load[None, :]))
            e = np.where(fit, x - pred, np.nan)
            d = e - rack_m * np.nan_to_num(_group_median(e, place, 3))
            if jobs is not None:
                d = d - job_m * np.nan_to_num(_group_median(d, np.where(jk > 0, jk, -1), 3))
            # the node's own spread in its load bin
            bin_ = np.where((np.abs(u - lag1) > transient) | (since_back < 8), 3, np.digitize(u, bins))
            at = np.broadcast_to(bin_[:, None, None], (n, s, 1))
            sp = np.take_along_axis(spread, at, 2)[..., 0]
            sn = np.take_along_axis(seen, at, 2)[..., 0]
            typical = np.nanmedian(spread.transpose(1, 0, 2).reshape(s, -1), axis=1)
            resolution = np.where(np.isfinite(quantum), 0.5 * quantum, 0.0)
            sp_eff = np.fmax(np.fmax(sp, floor_share * typical[None, :]), resolution)
            settled = (since_back >= 8)[:, None] | ~on_load[None, :]   # after a missing sample the lag is off
            z[:, k] = np.where(~np.isnan(d) & (sn >= warmup_steps) & settled, d / sp_eff, np.nan)
            okd = ~np.isnan(d)
            rate = 1.0 / np.minimum(sn + 2.0, spread_halflife)
            grown = np.where(np.isnan(sp), np.abs(d) + 1e-9, sp + rate * (np.minimum(np.abs(d), clip * sp_eff) - sp))
            np.put_along_axis(spread, at, np.where(okd, grown, sp)[..., None], 2)
            np.put_along_axis(seen, at, (sn + okd)[..., None], 2)
            # learn: the sensor's resolution, then the fit (a job's first minutes are not learnt)
            ok = ~np.isnan(x)
            jump = np.abs(x - x_prev)
            quantum = np.where(jump > 0, np.fmin(quantum, jump), quantum)
            x_prev = np.where(ok, x, x_prev)
            learn = ok & ~(in_job[None, :] & (in_job_steps < job_settle)[:, None])
            keep = np.where(learn, lam, 1.0)
            A = keep[..., None, None] * A + learn[..., None, None] * (phi[..., :, None] * phi[..., None, :])
            b = keep[..., None] * b + learn[..., None] * (phi * np.nan_to_num(x)[..., None])
            w = keep * w + learn
        capped = np.minimum(np.abs(z), cap)
        out = {}
        for name, members in families.items():
            idx = [sensors.index(x) for x in members if x in sensors]
            if idx:
                out[name] = _smoothed(np.nanmax(capped[..., idx], axis=2), smooth_steps)
    return (out, z) if return_z else out


def _smoothed(score: np.ndarray, steps: int) -> np.ndarray:
    """The mean of each node's last ``steps`` scores (NaN left out; NaN where the step has none)."""
    if steps <= 1:
        return score
    n = score.shape[0]
    filled = np.nan_to_num(score, nan=0.0)
    count = (~np.isnan(score)).astype(float)
    pad = np.zeros((n, steps))
    c1 = np.concatenate([pad, np.cumsum(filled, axis=1)], axis=1)
    c2 = np.concatenate([pad, np.cumsum(count, axis=1)], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (c1[:, steps:] - c1[:, :-steps]) / (c2[:, steps:] - c2[:, :-steps])
    return np.where(np.isnan(score), np.nan, mean)


def calibrated(score: np.ndarray, q: float = 0.999, every: int = 240, min_steps: int = 480) -> np.ndarray:
    """``score (nodes, steps)`` over its running ``q``-quantile over all nodes and the steps before,
    recomputed every ``every`` steps (NaN before ``min_steps``): families on one scale, causally.

    >>> s = np.tile(np.arange(1.0, 1001.0), (2, 1))
    >>> c = calibrated(s, q=0.5, every=100, min_steps=100)
    >>> bool(np.isnan(c[0, 99])), float(c[0, 100])      # step 100 over the median of steps 0-99 (50.5)
    (True, 2.0)
    """
    s = np.asarray(score, float)
    out = np.full(s.shape, np.nan)
    for k0 in range(min_steps, s.shape[1], every):
        past = s[:, :k0]
        past = past[~np.isnan(past)]
        if past.size:
            ref = float(np.quantile(past, q))
            if ref > 0:
                out[:, k0:k0 + every] = s[:, k0:k0 + every] / ref
    return out


def family_vote_score(family_scores: dict, families=VOTE_FAMILIES, q: float = 0.999) -> np.ndarray:
    """The largest :func:`calibrated` family score over ``families`` (those present): 1 is a family's
    running 99.9th percentile.  Vote it with ``vote_of(score, scale=1.0)``."""
    parts = [calibrated(family_scores[f], q) for f in families if f in family_scores]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmax(np.stack(parts), axis=0)
