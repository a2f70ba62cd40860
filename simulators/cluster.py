"""Discrete-event simulator of a batch-scheduled cluster with failures and hpcguard policies.

Events (FARS §5.1): job submissions and terminations, node failures and repairs,
predictor invocations (every FARS interval), PFS degradation start/end.  Scheduling is
FCFS with EASY backfilling: jobs start in arrival order; when the queue head does not
fit, it gets a reservation at the *shadow time* (the earliest time enough nodes are
expected free, from running jobs' estimates and repair times) and later jobs may
start now if they end before the shadow time or only use the *extra* nodes.

Jobs are checkpointed periodically with a per-job interval τ (compute time between
checkpoints) and cost δ; a run *segment* (from a start or restart to its interruption)
is ``overhead + w + (⌈w/τ⌉ − 1) δ`` long for remaining work ``w``.  Checkpoints are
accounted analytically (no event per checkpoint).  When a node fails, the job on it
loses the work since its last checkpoint, releases its nodes, and is re-queued at the
head of the queue; it restarts from the checkpoint paying the restart cost.  Failed
nodes are down for the record's repair time.  A live migration moves a job's processes
but writes nothing: the work since its last checkpoint is carried into the new segment,
still at risk, and the periodic schedule goes on from that checkpoint.

Policies (``POLICIES``) combine: the checkpoint interval (none, Young, Daly, the
failure-probability aware interval, burst-buffer multilevel), FARS rescheduling with
the dynamic spare pool (SUL-D, JFR-D, FSD-D; FARS §3.2, §4), the multilevel
migrate/safeguard decision tree (seed 003 Fig. 4.2) and CanarIO's IO-aware actions
(seed 004 Fig. 5.1).  Every decision calls the ``hpcguard.models`` function the
streaming decision agent uses.

Example
-------
>>> import numpy as np
>>> from hpcguard.simulators.workload import synthetic_workload
>>> from hpcguard.simulators.failures import renewal_failures
>>> wl = synthetic_workload(np.random.default_rng(0), n_jobs=300, nodes=64)
>>> fl = renewal_failures(np.random.default_rng(1), 64, 30 * 86400, mtbf_h=24 * 14)
>>> res = simulate(wl, 64, fl, policy="young")
>>> res.completed == 300
True
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from hpcguard.models import fars
from hpcguard.models.policy import SUMMIT, DecisionPolicy, SiteCosts, acted_sigma, break_even_age_s
from hpcguard.simulators.failures import FailureTrace, Predictions, empty_predictions
from hpcguard.simulators.workload import Workload

# event kinds, in tie-break order at equal times
_REPAIR, _END, _FAIL, _PFS_START, _PFS_END, _PREDICT, _SUBMIT, _LIMIT = range(8)
INF = float("inf")
DEFAULT_LEAD_S = 300.0   # warning lead for the multilevel tree when the predictor spec gives none (seed 000: 2–7 min)


@dataclass(frozen=True)
class Costs:
    """Fault-tolerance costs in seconds (defaults: FARS Tab. 3; burst buffer and migration: seed 003)."""

    ckpt_s: float = 180.0          # O_ckp, checkpoint to the PFS
    restart_s: float = 180.0       # O_r, restart from a PFS checkpoint
    fars_overhead_s: float = 360.0  # O_F (stop-and-restart: O_ckp + O_r)
    fars_interval_s: float = 1800.0  # I_F
    bb_ckpt_s: float = 30.0        # checkpoint to the burst buffer (blocking part)
    bb_restart_s: float = 30.0     # restart from the burst buffer
    requeue_s: float = 0.0         # extra re-queue penalty before a failed job may start again
    # the decision agent's cost model: live-migration and safeguard-checkpoint times of the Fig. 4.2 tree
    site: SiteCosts = SUMMIT  # seed 003's Summit: the paper reproductions


@dataclass(frozen=True)
class Policy:
    """What the simulator does about failures."""

    name: str
    checkpoint: str = "young"      # none | young | daly | aware | multilevel
    fars: Optional[str] = None     # sul-d | jfr-d | fsd-d
    safeguard: bool = False        # seed 003 model C/D: safeguard checkpoint on a warning
    migrate: bool = False          # seed 003 model D: live migration on a warning
    burst_buffer: bool = False     # checkpoints to the burst buffer (seed 003 models B–D)
    io_aware: bool = False         # CanarIO actions (seed 004 Fig. 5.1)

    @property
    def uses_predictor(self) -> bool:
        return bool(self.fars or self.safeguard or self.migrate)


POLICIES: dict[str, Policy] = {
    "none": Policy("none", checkpoint="none"),
    "fcfs": Policy("fcfs", checkpoint="young"),
    "young": Policy("young", checkpoint="young"),
    "daly": Policy("daly", checkpoint="daly"),
    "aware": Policy("aware", checkpoint="aware"),
    "sul-d": Policy("sul-d", checkpoint="young", fars="sul-d"),
    "jfr-d": Policy("jfr-d", checkpoint="young", fars="jfr-d"),
    "fsd-d": Policy("fsd-d", checkpoint="young", fars="fsd-d"),
    "multilevel-bb": Policy("multilevel-bb", checkpoint="multilevel", burst_buffer=True),
    "multilevel-safeguard": Policy("multilevel-safeguard", checkpoint="multilevel", burst_buffer=True,
                                   safeguard=True),
    "multilevel": Policy("multilevel", checkpoint="multilevel", burst_buffer=True, safeguard=True, migrate=True),
    "io-aware": Policy("io-aware", checkpoint="young", io_aware=True),
}


@dataclass(frozen=True)
class IoModel:
    """IO contention (seed 004 §5.2).

    IO-sensitive jobs progress ``contention_slowdown`` slower while the running jobs'
    IO demand exceeds ``io_limit`` (units of the limit; 10–20 % in the paper) and
    ``event_slowdown`` slower during an injected PFS degradation (80–90 %).  A job that
    overruns its time limit (its estimate) is killed and re-submitted with
    probability ``rerun_probability`` (50 %).
    """

    io_limit: float = INF
    contention_slowdown: float = 0.15
    event_slowdown: float = 0.85
    pfs_events: tuple = ()            # ((start_s, duration_s), ...)
    rerun_probability: float = 0.5
    enforce_time_limit: bool = True


@dataclass
class SimResult:
    """Per-job outcome arrays and cluster totals of one run (input to cluster_metrics)."""

    policy: str
    nodes: int
    submit: np.ndarray
    first_start: np.ndarray
    completion: np.ndarray       # NaN for jobs that never completed
    runtime: np.ndarray
    size: np.ndarray
    failed: np.ndarray           # number of failures that hit the job
    fail_delay: np.ndarray       # wall delay caused by failures (s)
    totals: dict = field(default_factory=dict)

    @property
    def completed(self) -> int:
        return int(np.isfinite(self.completion).sum())


def checkpoint_intervals(wl: Workload, policy: Policy, costs: Costs, node_mtbf_h: float,
                         shape: Optional[float] = None, sigma: float = 0.0,
                         acted_age_s: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-job checkpoint interval τ (s; inf = no checkpoints) and cost δ (s) for ``policy``.

    Calls :mod:`hpcguard.models.checkpoint` (the decision agent's implementation).  The
    job MTBF is the node MTBF scaled by the job's node count (seed 000 Eq. 3.14).
    ``multilevel``: ``sigma`` is the share of failures warned in time; with the break-even
    rule only warned failures whose work is older than ``acted_age_s`` are migrated, and
    Eq. 5.10's σ is the share that is (:func:`hpcguard.models.policy.acted_sigma`).
    """
    n = len(wl)
    delta_s = costs.bb_ckpt_s if policy.burst_buffer else costs.ckpt_s
    delta = np.full(n, delta_s)
    if policy.checkpoint == "none" or not math.isfinite(node_mtbf_h):
        return np.full(n, INF), delta
    from hpcguard.models import checkpoint as ck

    sizes, inv = np.unique(wl.size, return_inverse=True)
    if policy.checkpoint == "aware":
        # Algorithm 1 per distinct (node count, estimated runtime in minutes); Eq. 3.14 scales the node MTBF
        minutes = np.maximum(np.round(wl.estimate / 60.0), 1.0)
        keys, kinv = np.unique(np.stack([wl.size.astype(float), minutes], axis=1), axis=0, return_inverse=True)
        kinv = np.asarray(kinv).reshape(-1)
        tau_k = np.full(len(keys), INF)
        for nodes in np.unique(keys[:, 0]):
            sel = np.flatnonzero(keys[:, 0] == nodes)
            tau_k[sel] = aware_tau_s(ck, keys[sel, 1] * 60.0, int(nodes), delta_s, node_mtbf_h, shape)
        return tau_k[kinv], delta
    per_size = np.empty(sizes.size)
    for k, nodes in enumerate(sizes):
        job_mtbf_h = float(ck.scale_mtbf(node_mtbf_h, int(nodes), 1))
        if policy.checkpoint == "young":
            iv = ck.young_interval(job_mtbf_h, delta_s / 3600.0)
        elif policy.checkpoint == "daly":
            iv = ck.daly_interval(job_mtbf_h, delta_s / 3600.0)
        elif policy.checkpoint == "multilevel":
            iv = acted_sigma(sigma, acted_age_s / 3600.0, job_mtbf_h, delta_s / 3600.0, costs.ckpt_s / 3600.0)[1] \
                if sigma > 0 else ck.multilevel_interval(job_mtbf_h, delta_s / 3600.0, costs.ckpt_s / 3600.0)
        else:
            raise ValueError(f"unknown checkpoint method {policy.checkpoint!r}")
        iv = float(getattr(iv, "interval_h", iv))
        per_size[k] = iv * 3600.0 if iv > 0 and math.isfinite(iv) else INF
    return per_size[inv], delta


def aware_tau_s(ck, work_s: np.ndarray, nodes: int, delta_s: float, node_mtbf_h: float,
                shape: Optional[float]) -> np.ndarray:
    """Aware interval (seed 000 Algorithm 1) of jobs with ``work_s`` left, as simulator τ in seconds.

    Eq. 3.8 counts ``floor(t / t_u)`` checkpoints in a job of length ``t``; the simulator places
    ``ceil(w / τ) − 1`` checkpoints in ``w`` of work, so τ is stretched to ``w / (k + 1)`` when
    that is longer — the same number ``k`` of checkpoints, evenly spaced.  Jobs shorter than
    two checkpoints and "no checkpoint" answers get τ = inf.
    """
    work_s = np.asarray(work_s, float)
    tau = np.full(work_s.size, INF)
    ok = work_s > 2 * delta_s
    if not ok.any():
        return tau
    rs = ck.aware_intervals_batch(work_s[ok] / 3600.0, delta_s / 3600.0, node_mtbf_h, shape=shape,
                                  poisson=shape is None, nodes=int(nodes), system_nodes=1)
    out = np.array([INF if r.no_checkpoint or not r.checkpoints else
                    max(r.interval_h * 3600.0, w / (r.checkpoints + 1)) for r, w in zip(rs, work_s[ok])])
    tau[ok] = out
    return tau


class ClusterSimulator:
    """One simulation run; build it, call :meth:`run`, read the :class:`SimResult`."""

    def __init__(self, workload: Workload, nodes: int, failures: FailureTrace, policy: Policy,
                 costs: Costs = Costs(), predictions: Optional[Predictions] = None,
                 io: Optional[IoModel] = None, seed: int = 0, node_mtbf_h: Optional[float] = None,
                 weibull_shape: Optional[float] = None, horizon_s: Optional[float] = None,
                 progress: Optional[Callable[[float], None]] = None, precision: float = 0.7,
                 break_even: bool = True):
        if nodes <= 0:
            raise ValueError("nodes must be positive")
        if len(workload) == 0:
            raise ValueError("workload has no jobs")
        if int(workload.size.max()) > nodes:
            raise ValueError(f"a job needs {int(workload.size.max())} nodes but the cluster has {nodes}")
        self.wl, self.N, self.failures, self.policy, self.costs = workload, int(nodes), failures, policy, costs
        self.pred = predictions if (predictions is not None and policy.uses_predictor) else empty_predictions()
        self.io = io
        self.precision = float(precision)       # the predictor precision FARS's f_i assumes
        self.rng = np.random.default_rng(seed)
        self.progress = progress
        span = float(horizon_s or (workload.submit.max() + workload.runtime.sum() / nodes + 1.0))
        if node_mtbf_h is None:
            node_mtbf_h = (span * nodes / len(failures) / 3600.0) if len(failures) else INF
        self.node_mtbf_h = node_mtbf_h
        self.weibull_shape = weibull_shape
        sigma, acted_age_s = 0.0, 0.0
        if policy.migrate and len(self.pred):
            sigma = min(self.pred.measured_recall(failures), 0.95)
            if break_even:   # Eq. 5.10's σ: only the warned failures the break-even rule migrates
                acted_age_s = break_even_age_s(self.precision, costs.site.migration_seconds())
        self.sigma, self.acted_age_s = sigma, acted_age_s
        self.tau, self.delta = checkpoint_intervals(workload, policy, costs, node_mtbf_h, weibull_shape, sigma,
                                                    acted_age_s)
        # the streaming decision agent's policy object, with the same site costs
        self.decision = DecisionPolicy(costs.site, strategy=policy.fars or "sul-d", precision=self.precision,
                                       interval_h=costs.fars_interval_s / 3600.0,
                                       overhead_h=costs.fars_overhead_s / 3600.0 if policy.fars else None,
                                       break_even=bool(break_even))
        self.decisions: list[dict] = []   # every action the policy returned, in decision order

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        wl, N, pol = self.wl, self.N, self.policy
        J = len(wl)
        self.size = wl.size.astype(np.int64).tolist()
        self.est = wl.estimate.astype(float).tolist()
        self.rem = wl.runtime.astype(float).tolist()      # remaining work
        self.tau_l, self.delta_l = self.tau.tolist(), self.delta.tolist()   # per job; aware re-evaluates τ
        self.seg_start = [0.0] * J
        self.run_start = [0.0] * J         # when the job last (re)started (Slurm's start_time)
        self.seg_ovh = [0.0] * J
        self.seg_ovh_kind = ["start"] * J
        self.seg_wall = [0.0] * J           # planned effective length of the segment
        # work since the last checkpoint that a live migration carried into the segment: done, not durable
        self.seg_carry = [0.0] * J
        self.seg_age0 = [0.0] * J            # wall age of the last durable state at the segment start
        self.eff_done = [0.0] * J            # effective time done before eff_last
        self.eff_last = [0.0] * J
        self.rate = [1.0] * J
        self.version = [0] * J
        self.job_nodes: list[Optional[np.ndarray]] = [None] * J
        self.first_start = np.full(J, np.nan)
        self.completion = np.full(J, np.nan)
        self.failed = np.zeros(J, np.int64)
        self.fail_delay = np.zeros(J)
        self.fail_at = [-1.0] * J
        self.limit_at = [INF] * J
        self.restart_kind = [None] * J      # overhead kind to pay at the next start
        self.node_job = np.full(N, -1, np.int64)
        self.down_until = np.zeros(N)
        self.node_down = np.zeros(N, bool)
        self.n_free = N
        self.queue: list[int] = []
        self.running: set[int] = set()
        self.delayed: set[int] = set()
        self.pfs_active = 0
        self.acc = {k: 0.0 for k in ("useful", "checkpoint", "lost", "restart", "migration", "io_slowdown",
                                     "busy", "fars_overhead")}
        self.counts = {k: 0 for k in ("failures", "failures_on_jobs", "predictions", "true_predictions",
                                      "fars_rescheduled", "migrations", "safeguards", "io_delays",
                                      "io_replacements", "limit_kills", "reruns", "abandoned",
                                      "avoided_failures")}
        self.now = 0.0
        self._seq = 0
        ev: list = []
        self.events = ev
        push = self._push
        for j, t in enumerate(wl.submit.tolist()):
            ev.append((t, _SUBMIT, j, 0, 0))
        heapq.heapify(ev)
        for i, (t, n) in enumerate(zip(self.failures.time.tolist(), self.failures.node.tolist())):
            push(t, _FAIL, i, n)
        if len(self.pred) and not self.policy.fars:
            # multilevel (seed 003): a warning reaches the job ``lead`` before the predicted failure time
            # (the failure's time for a true warning, a random time in the window for a false alarm)
            p = self.pred
            lead = p.lead_each if p.lead_each is not None else (p.lead_s if p.lead_s > 0 else DEFAULT_LEAD_S)
            true_t = (self.failures.time[np.maximum(p.failure_index, 0)] if len(self.failures)
                      else np.zeros(len(p)))      # a trace without failures: every warning is false
            target = np.where(p.failure_index >= 0, true_t, self.rng.uniform(p.window_start, p.window_end))
            self.pred_target = target
            for i, t in enumerate(np.maximum(target - lead, p.issued).tolist()):
                push(t, _PREDICT, i, i + 1)
        elif len(self.pred):
            issued = self.pred.issued
            starts = np.flatnonzero(np.r_[True, issued[1:] != issued[:-1]])
            bounds = np.r_[starts, issued.size]
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                push(float(issued[a]), _PREDICT, a, b)
        if self.io is not None:
            for start, dur in self.io.pfs_events:
                push(float(start), _PFS_START, 0, 0)
                push(float(start + dur), _PFS_END, 0, 0)
        done = 0
        n_events = 0
        last_submit = float(wl.submit.max())
        tick = max(J // 200, 1)
        while ev and done < J:
            t, kind, a, b, _ = heapq.heappop(ev)
            self.now = t
            n_events += 1
            if kind == _END:
                if b == self.version[a]:
                    self._finish(a, t)
                    done += 1
                    if self.progress and done % tick == 0:
                        self.progress(done / J)
                    self._schedule(t)
            elif kind == _SUBMIT:
                self.queue.append(a)
                self._schedule(t)
            elif kind == _FAIL:
                self._fail(a, b, t)
            elif kind == _REPAIR:
                if self.node_down[a] and self.down_until[a] <= t:
                    self.node_down[a] = False
                    if self.node_job[a] < 0:
                        self.n_free += 1
                    self._schedule(t)
            elif kind == _PREDICT:
                self._on_predictions(a, b, t)
            elif kind == _LIMIT:
                if b == self.version[a] and a in self.running:
                    done += self._time_limit(a, t)
                    self._schedule(t)
            elif kind == _PFS_START:
                self.pfs_active += 1
                self._io_rates(t)
                if pol.io_aware:
                    self._io_actions(t)
                self._schedule(t)
            elif kind == _PFS_END:
                self.pfs_active -= 1
                self._io_rates(t)
                if self.pfs_active == 0 and self.delayed:
                    self.delayed.clear()
                self._schedule(t)
            if not self.running and not self.queue and t > last_submit and done < J:
                break
        if self.progress:
            self.progress(1.0)
        totals = dict(self.acc)
        totals.update(self.counts)
        totals.update(events=n_events, node_mtbf_h=self.node_mtbf_h,
                      mean_interval_h=float(np.nanmean(np.where(np.isfinite(self.tau), self.tau, np.nan)) / 3600.0)
                      if np.isfinite(self.tau).any() else None,
                      predictions_total=len(self.pred))
        return SimResult(policy=pol.name, nodes=N, submit=wl.submit.astype(float), first_start=self.first_start,
                         completion=self.completion, runtime=wl.runtime.astype(float), size=wl.size.copy(),
                         failed=self.failed, fail_delay=self.fail_delay, totals=totals)

    def _push(self, t: float, kind: int, a: int, b: int) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, kind, a, b, self._seq))

    # ------------------------------------------------------------------ segments
    def _segment_length(self, j: int) -> float:
        w, tau, d = self.rem[j], self.tau_l[j], self.delta_l[j]
        # carried work p shifts the schedule: the first checkpoint comes after τ − p of new work
        n_ck = max(math.ceil((w + self.seg_carry[j]) / tau) - 1, 0) if tau < INF else 0
        return self.seg_ovh[j] + w + n_ck * d

    def _aware_restart_tau(self, j: int) -> float:
        """The aware interval is a function of the work left: re-evaluate it after a failure."""
        from hpcguard.models import checkpoint as ck

        key = (self.size[j], max(round(self.rem[j] / 60.0), 1))
        cache = self.__dict__.setdefault("_aware_cache", {})
        if key not in cache:
            cache[key] = float(aware_tau_s(ck, np.array([key[1] * 60.0]), key[0], self.delta_l[j],
                                           self.node_mtbf_h, self.weibull_shape)[0])
        return cache[key]

    def _eff(self, j: int, t: float) -> float:
        return self.eff_done[j] + (t - self.eff_last[j]) * self.rate[j]

    def _decompose(self, j: int, eff: float) -> tuple[float, float, float, float]:
        """Effective time ``eff`` into (overhead spent, work saved, work unsaved, checkpoint time).

        Work the segment carried in from a live migration (``seg_carry``, p) counts as done
        before the segment's start: the schedule is that of a segment with ``p`` more work
        begun ``p`` earlier.  So "saved" includes ``p`` once a checkpoint completed in this
        segment, "unsaved" includes it before; the work this segment did is
        ``saved + unsaved − p``.
        """
        ovh, p = self.seg_ovh[j], self.seg_carry[j]
        if eff <= ovh:
            return eff, 0.0, p, 0.0
        e = eff - ovh + p
        w, tau, d = self.rem[j] + p, self.tau_l[j], self.delta_l[j]
        if tau == INF:
            return ovh, 0.0, min(e, w), 0.0
        n_ck = max(math.ceil(w / tau) - 1, 0)
        k = min(int(e // (tau + d)), n_ck)
        rest = e - k * (tau + d)
        if k < n_ck:
            unsaved, partial = min(rest, tau), max(rest - tau, 0.0)
        else:
            unsaved, partial = min(rest, w - k * tau), 0.0
        return ovh, k * tau, unsaved, k * d + partial

    def _start(self, j: int, t: float) -> None:
        size = self.size[j]
        free = np.flatnonzero((self.node_job < 0) & ~self.node_down)[:size]
        self.node_job[free] = j
        self.n_free -= size
        self.job_nodes[j] = free
        if math.isnan(self.first_start[j]):
            self.first_start[j] = t
        self.run_start[j] = t
        kind = self.restart_kind[j]
        if kind is None:
            ovh, okind = 0.0, "start"
        else:
            ovh = self.costs.bb_restart_s if self.policy.burst_buffer else self.costs.restart_s
            okind = "restart"
            self.fail_delay[j] += t - self.fail_at[j] + ovh
        self.restart_kind[j] = None
        self._begin_segment(j, t, ovh, okind)
        self.running.add(j)
        self.limit_at[j] = t + ovh + self.est[j] + 1e-6   # a (re)started job gets its full time limit
        if self.io is not None and self.io.enforce_time_limit and self.est[j] > 0:
            self._push(self.limit_at[j], _LIMIT, j, self.version[j])
        if self.io is not None and self.wl.io_demand[j] > 0:
            self._io_rates(t)

    def _begin_segment(self, j: int, t: float, ovh: float, kind: str, carry: float = 0.0, age: float = 0.0) -> None:
        """Start a run segment at ``t`` with overhead ``ovh``; ``carry`` s of work since the last
        checkpoint, ``age`` s of wall time old, come along (a live migration), else none."""
        if kind == "restart" and self.policy.checkpoint == "aware":
            self.tau_l[j] = self._aware_restart_tau(j)
        self.seg_start[j] = t
        self.seg_carry[j] = carry
        self.seg_age0[j] = age
        self.seg_ovh[j] = ovh
        self.seg_ovh_kind[j] = kind
        self.eff_done[j] = 0.0
        self.eff_last[j] = t
        self.rate[j] = self._rate_for(j)
        self.seg_wall[j] = self._segment_length(j)
        self.version[j] += 1
        self._push(t + self.seg_wall[j] / self.rate[j], _END, j, self.version[j])

    def _close_segment(self, j: int, t: float, unsaved_to: str) -> tuple[float, float]:
        """Account the current segment up to ``t``; returns (work made durable, work lost).

        ``unsaved_to`` says what becomes of the work since the last checkpoint: ``"keep"``
        (the job ends, or a checkpoint is written: it is durable), ``"lose"`` (a failure or
        kill: the job restarts from its last checkpoint) or ``"carry"`` (a live migration:
        the job goes on from where it is, but nothing was written, so the work stays at risk;
        the caller passes :attr:`seg_carry` on to the next segment).
        """
        n = self.size[j]
        eff = min(self._eff(j, t), self.seg_wall[j])
        ovh, saved, unsaved, ckpt = self._decompose(j, eff)
        carried = self.seg_carry[j]
        done = saved + unsaved - carried     # the work this segment did
        wall = t - self.seg_start[j]
        kind = self.seg_ovh_kind[j]
        a = self.acc
        a[{"restart": "restart", "migration": "migration", "safeguard": "checkpoint", "fars": "fars_overhead"}
          .get(kind, "restart")] += ovh * n
        a["checkpoint"] += ckpt * n
        a["io_slowdown"] += max(wall - eff, 0.0) * n
        a["busy"] += wall * n
        lost = 0.0
        if unsaved_to == "keep":
            saved += unsaved
            unsaved = 0.0
        elif unsaved_to == "lose":
            lost = unsaved
            a["lost"] += unsaved * n
        elif unsaved_to != "carry":
            raise ValueError(f"unsaved_to must be keep, lose or carry, not {unsaved_to!r}")
        a["useful"] += saved * n
        # the job is ``done`` further on; a lost stretch (carried work included) is to do again
        self.rem[j] = max(self.rem[j] - done + lost, 0.0)
        self.seg_carry[j] = unsaved if unsaved_to == "carry" else 0.0
        return saved, lost

    def _release(self, j: int) -> None:
        nodes = self.job_nodes[j]
        self.node_job[nodes] = -1
        self.n_free += int((~self.node_down[nodes]).sum())
        self.job_nodes[j] = None
        self.running.discard(j)

    def _finish(self, j: int, t: float) -> None:
        self._close_segment(j, t, "keep")
        self.completion[j] = t
        self._release(j)
        if self.io is not None and self.wl.io_demand[j] > 0:
            self._io_rates(t)

    # ------------------------------------------------------------------ failures
    def _fail(self, i: int, node: int, t: float) -> None:
        self.counts["failures"] += 1
        until = t + float(self.failures.repair[i])
        was_down = self.node_down[node]
        self.node_down[node] = True
        self.down_until[node] = max(self.down_until[node], until)
        self._push(self.down_until[node], _REPAIR, node, 0)
        j = int(self.node_job[node])
        if j < 0:
            if not was_down:
                self.n_free -= 1
            return
        self.counts["failures_on_jobs"] += 1
        self._kill(j, t, failure=True)
        self._schedule(t)

    def _kill(self, j: int, t: float, failure: bool) -> None:
        _, lost = self._close_segment(j, t, "lose")
        self._release(j)
        self.version[j] += 1
        if failure:
            self.failed[j] += 1
            self.fail_delay[j] += lost + self.costs.requeue_s
            self.fail_at[j] = t + self.costs.requeue_s
            self.restart_kind[j] = "restart"
        self.queue.insert(0, j)

    def _time_limit(self, j: int, t: float) -> int:
        """Seed 004 §5.2: a job past its time limit is killed; re-run with probability 1/2."""
        self.counts["limit_kills"] += 1
        self._close_segment(j, t, "lose")
        self._release(j)
        self.version[j] += 1
        if self.rng.random() < self.io.rerun_probability:
            self.counts["reruns"] += 1
            self.rem[j] = float(self.wl.runtime[j])
            self.queue.append(j)
            return 0
        self.counts["abandoned"] += 1
        return 1

    # ------------------------------------------------------------------ scheduling (FCFS + EASY)
    def _expected_end(self, j: int, now: float) -> float:
        done_work = float(self.wl.runtime[j]) - self.rem[j]
        est_rem = max(self.est[j] - done_work, 0.0)
        tau, d = self.tau_l[j], self.delta_l[j]
        stretch = 1.0 + (d / tau if tau < INF else 0.0)
        return max(self.seg_start[j] + self.seg_ovh[j] + est_rem * stretch, now)

    def _reservation(self, now: float) -> tuple[float, int]:
        """Shadow time and extra nodes for the queue head (EASY)."""
        need = self.size[self.queue[0]]
        avail = self.n_free
        if avail >= need:
            return now, avail - need
        ends = [(self._expected_end(j, now), self.size[j]) for j in self.running]
        down = np.flatnonzero(self.node_down & (self.node_job < 0))
        ends.extend((float(self.down_until[n]), 1) for n in down.tolist())
        ends.sort()
        for t_end, n in ends:
            avail += n
            if avail >= need:
                return t_end, avail - need
        return INF, 0

    def _schedule(self, now: float) -> None:
        q = self.queue
        if not q:
            return
        if self.pfs_active and self.policy.io_aware:
            self._io_delays(now)
        # start jobs in order while they fit (delayed IO-sensitive jobs are skipped)
        while q:
            head = None
            for pos, j in enumerate(q):
                if j not in self.delayed:
                    head = pos
                    break
            if head is None:
                return
            j = q[head]
            if self.size[j] > self.n_free:
                break
            q.pop(head)
            self._start(j, now)
        if not q or self.n_free == 0:
            return
        head_pos = next((p for p, j in enumerate(q) if j not in self.delayed), None)
        if head_pos is None:
            return
        shadow, extra = self._reservation_for(q[head_pos], now)
        k = head_pos + 1
        while k < len(q) and self.n_free > 0:
            j = q[k]
            s = self.size[j]
            if s <= self.n_free and j not in self.delayed:
                fits_time = now + self._planned_wall(j) <= shadow
                if fits_time or s <= extra:
                    q.pop(k)
                    self._start(j, now)
                    if not fits_time:
                        extra -= s
                    continue
            k += 1

    def _reservation_for(self, j: int, now: float) -> tuple[float, int]:
        q = self.queue
        if q[0] == j:
            return self._reservation(now)
        pos = q.index(j)
        q[0], q[pos] = q[pos], q[0]
        try:
            return self._reservation(now)
        finally:
            q[0], q[pos] = q[pos], q[0]

    def _planned_wall(self, j: int) -> float:
        done_work = float(self.wl.runtime[j]) - self.rem[j]
        est_rem = max(self.est[j] - done_work, 0.0)
        tau, d = self.tau_l[j], self.delta_l[j]
        restart = self.costs.restart_s if self.restart_kind[j] else 0.0
        return restart + est_rem * (1.0 + (d / tau if tau < INF else 0.0))

    # ------------------------------------------------------------------ predictions: FARS and multilevel
    def _on_predictions(self, a: int, b: int, t: float) -> None:
        p = self.pred
        self.counts["predictions"] += b - a
        self.counts["true_predictions"] += int((p.failure_index[a:b] >= 0).sum())
        if self.policy.fars:
            # FARS: the failure may come any time in the predicted window
            deadline = p.window_end[a:b]
        else:
            # multilevel (seed 003): the warning comes ``lead`` before the predicted failure time
            deadline = self.pred_target[a:b]
        self._decide(p.node[a:b], p.failure_index[a:b], deadline, t, float(p.window_end[a:b].max()))

    def _spare_pool(self, suspicious: np.ndarray, now: float) -> np.ndarray:
        """FARS §3.2 spare pool (:func:`hpcguard.models.fars.spare_pool`): idle − suspicious −
        the EASY reservation of the queue head (running jobs' estimated ends and repairs free nodes)."""
        idle_ids = np.flatnonzero((self.node_job < 0) & ~self.node_down)
        head = next((j for j in self.queue if j not in self.delayed), None)
        head_size, releases = 0, []
        if head is not None:
            head_size = self.size[head]
            releases = [(self._expected_end(j, now), self.size[j]) for j in self.running]
            down = np.flatnonzero(self.node_down & (self.node_job < 0))
            releases += [(float(self.down_until[n]), 1) for n in down.tolist()]
        return np.array(fars.spare_pool(idle_ids.tolist(), suspicious.tolist(), head_size, releases), np.int64)

    def _job_view(self, j: int, now: float) -> dict:
        """A running job as :class:`hpcguard.models.policy.DecisionPolicy` reads it (the agent's job record).

        ``start_time`` is when the job last (re)started and ``start_time + time_limit_s`` when it
        ends at the latest as the scheduler knows it: its estimate (with the checkpoints it still
        takes, :meth:`_expected_end`), or the enforced time limit when that comes first.  The
        policy counts nothing at risk for a job that ends before the predicted failure.
        """
        end = self._expected_end(j, now)
        if self.io is not None and self.io.enforce_time_limit:
            end = min(end, self.limit_at[j])
        since = self._since_durable(j, now)
        return {"job_id": str(j), "nodes": [str(n) for n in self.job_nodes[j].tolist()], "num_nodes": self.size[j],
                "start_time": self.run_start[j], "time_limit_s": max(end - self.run_start[j], 1e-3),
                "last_checkpoint_time": now - max(since, 0.0),
                "requeue_h": self.costs.requeue_s / 3600.0, "restart_h": self.costs.restart_s / 3600.0}

    def _since_durable(self, j: int, now: float) -> float:
        """Wall time since job ``j``'s last durable state: its last checkpoint in this segment, else
        the segment start (plus the age of the work a live migration carried in)."""
        eff = min(self._eff(j, now), self.seg_wall[j])
        ovh, saved, _, _ = self._decompose(j, eff)
        tau, d = self.tau_l[j], self.delta_l[j]
        k = round(saved / tau) if tau < INF else 0
        if k == 0:
            return now - self.seg_start[j] + self.seg_age0[j]
        # on the shifted schedule (see _decompose) checkpoint k ends at k(τ + δ) − p into the work
        return max(eff - ovh + self.seg_carry[j] - k * (tau + d), 0.0) / self.rate[j]

    def _decide(self, nodes: np.ndarray, fidx: np.ndarray, deadline: np.ndarray, t: float, window_end: float) -> None:
        """Ask the decision policy about the warned nodes and apply what it says.

        Migrations take nodes from the FARS spare pool (FARS moves are stop-and-restart with
        overhead O_F; multilevel moves are live migrations); a safeguard checkpoint restarts
        the periodic schedule; a warned idle node is drained until its predicted failure.
        """
        pol = self.policy
        preds, jobs = [], {}
        for n, dl in zip(nodes.tolist(), deadline.tolist()):
            preds.append({"node": str(n), "time": t, "warn": True, "lead_minutes": max(dl - t, 0.0) / 60.0,
                          "failure_probability": self.precision, "model": "simulator"})
            j = int(self.node_job[n])
            if j >= 0:
                jobs[str(n)] = self._job_view(j, t)
        suspicious = np.unique(nodes)
        spare = self._spare_pool(suspicious, t) if (pol.fars or pol.migrate) else np.zeros(0, np.int64)
        acts = self.decision(preds, jobs, spare.tolist(), now=t)
        self.decisions += acts
        free = spare.tolist()
        true_fail = {int(n) for n, fi in zip(nodes.tolist(), fidx.tolist()) if fi >= 0}
        for act in acts:
            if act["kind"] == "drain":
                n = int(act["nodes"][0])
                if not self.node_down[n]:
                    self._drain(np.array([n]), max(act["deadline"], window_end) + 1.0)
                continue
            j = int(act["job_id"])
            if j not in self.running:
                continue
            if act["kind"] == "migrate":
                bad = np.array(sorted(int(n) for n in act["reason"]["predicted_nodes"]), np.int64)
                take = min(bad.size, len(free))
                if take == 0:
                    continue
                new = np.array(free[:take], np.int64)
                del free[:take]
                overhead = self.costs.fars_overhead_s if pol.fars else act["reason"]["inputs"]["migration_s"]
                self._move(j, bad[:take], new, t, overhead, "fars" if pol.fars else "migration",
                           drain_until=max(act["deadline"], window_end) + 1.0)
                self.counts["fars_rescheduled" if pol.fars else "migrations"] += 1
                self.counts["avoided_failures"] += int(bool(true_fail & set(bad[:take].tolist())))
            elif act["kind"] == "checkpoint" and pol.safeguard:
                # a safeguard checkpoint writes the job's state: its unsaved work becomes durable
                self._close_segment(j, t, "keep")
                # the periodic schedule restarts after the safeguard checkpoint (seed 003 Tab. 4.1)
                self._begin_segment(j, t, act["reason"]["inputs"]["safeguard_ckpt_s"], "safeguard")
                self.counts["safeguards"] += 1

    def _drain(self, nodes: np.ndarray, until: float) -> None:
        """Keep warned nodes out of scheduling until ``until`` (the end of the warning window)."""
        for n in nodes.tolist():
            if not self.node_down[n] and self.node_job[n] < 0:
                self.n_free -= 1
            self.node_down[n] = True
            if until > self.down_until[n]:
                self.down_until[n] = until
                self._push(until, _REPAIR, n, 0)

    def _move(self, j: int, old: np.ndarray, new: np.ndarray, t: float, overhead: float, kind: str,
              drain_until: float = 0.0) -> None:
        """Move job ``j``'s processes from ``old`` to ``new`` nodes, keeping its progress; drain ``old``.

        A FARS move is stop-and-restart (its overhead O_F is a checkpoint and a restart): the
        work so far is durable and the periodic schedule starts again.  A live migration
        (``kind="migration"``) copies the processes' memory and writes nothing: the work since
        the last checkpoint goes with the job, still at risk, until the next checkpoint,
        which comes when the old schedule says; a later failure loses it.
        """
        live = kind == "migration"
        age = self._since_durable(j, t) if live else 0.0
        self._close_segment(j, t, "carry" if live else "keep")
        carry = self.seg_carry[j]
        self.node_job[old] = -1
        self.n_free += int((~self.node_down[old]).sum())
        if drain_until > t:
            self._drain(old, drain_until)
        self.node_job[new] = j
        self.n_free -= len(new)
        nodes = self.job_nodes[j]
        keep = nodes[~np.isin(nodes, old)]
        self.job_nodes[j] = np.concatenate([keep, new])
        self._begin_segment(j, t, overhead, kind, carry=carry, age=age if carry > 0 else 0.0)

    # ------------------------------------------------------------------ IO contention and CanarIO
    def _rate_for(self, j: int) -> float:
        io = self.io
        if io is None or not self.wl.io_sensitive[j]:
            return 1.0
        slow = 0.0
        if self.pfs_active:
            slow = io.event_slowdown
        elif io.io_limit < INF and self._io_demand() > io.io_limit:
            slow = io.contention_slowdown
        return 1.0 / (1.0 + slow)

    def _io_demand(self) -> float:
        if not self.running:
            return 0.0
        return float(self.wl.io_demand[list(self.running)].sum())

    def _io_rates(self, t: float) -> None:
        """Re-time the running IO-sensitive jobs after the IO conditions changed."""
        for j in list(self.running):
            if not self.wl.io_sensitive[j]:
                continue
            new = self._rate_for(j)
            if new == self.rate[j]:
                continue
            self.eff_done[j] = self._eff(j, t)
            self.eff_last[j] = t
            self.rate[j] = new
            self.version[j] += 1
            left = max(self.seg_wall[j] - self.eff_done[j], 0.0)
            self._push(t + left / new, _END, j, self.version[j])
            if self.io.enforce_time_limit:
                self._push(self.limit_at[j], _LIMIT, j, self.version[j])

    def _canario_view(self, t: float):
        from hpcguard.models.canario import decisions

        state = {"degraded": bool(self.pfs_active), "probability": 1.0, "window_end": t, "features": {}}
        queue = [{"job_id": str(j), "num_nodes": self.size[j], "sensitivity": float(self.wl.io_sensitive[j]),
                  "predicted_io": float(self.wl.io_demand[j])} for j in self.queue]
        running = [{"job_id": str(j), "nodes": [str(n) for n in self.job_nodes[j].tolist()],
                    "num_nodes": self.size[j], "start": self.seg_start[j], "expected_runtime_s": self.est[j],
                    "sensitivity": float(self.wl.io_sensitive[j])} for j in self.running]
        return decisions, state, queue, running

    def _io_delays(self, t: float) -> None:
        decisions, state, queue, _ = self._canario_view(t)
        acts = decisions.io_aware_actions(state, queue, [], now=t, delayed=[str(j) for j in self.delayed])
        for act in acts:
            if act["kind"] == "delay":
                self.delayed.add(int(act["job_id"]))
                self.counts["io_delays"] += 1

    def _io_actions(self, t: float) -> None:
        decisions, state, queue, running = self._canario_view(t)
        acts = decisions.io_aware_actions(state, queue, running, now=t, delayed=[str(j) for j in self.delayed])
        for act in acts:
            j = int(act["job_id"])
            if act["kind"] == "delay":
                self.delayed.add(j)
                self.counts["io_delays"] += 1
            elif act["kind"] == "reschedule" and j in self.running:
                # the IO-sensitive job goes back to the queue (keeping its checkpointed work) and is held
                self._kill(j, t, failure=False)
                self.delayed.add(j)
                self.counts["io_replacements"] += 1


def simulate(workload: Workload, nodes: int, failures: FailureTrace, policy: str | Policy = "fcfs",
             costs: Costs = Costs(), predictions: Optional[Predictions] = None, precision: float = 0.7,
             io: Optional[IoModel] = None, seed: int = 0, node_mtbf_h: Optional[float] = None,
             weibull_shape: Optional[float] = None, horizon_s: Optional[float] = None,
             progress: Optional[Callable[[float], None]] = None, break_even: bool = True) -> SimResult:
    """Run one policy on a workload and failure trace (see module docstring).

    ``break_even``: the decision policy acts on a warning only when the expected saving
    (failure probability × node-hours at risk) exceeds the action's cost.
    """
    if isinstance(policy, str) and policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose from {sorted(POLICIES)}")
    pol = POLICIES[policy] if isinstance(policy, str) else policy
    sim = ClusterSimulator(workload, nodes, failures, pol, costs=costs, predictions=predictions, io=io, seed=seed,
                           node_mtbf_h=node_mtbf_h, weibull_shape=weibull_shape, horizon_s=horizon_s,
                           progress=progress, precision=precision, break_even=break_even)
    return sim.run()
