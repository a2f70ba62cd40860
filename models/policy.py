"""Decision policy: adaptive multilevel C/R decision tree (seed 003) with UC-aware gating.

Given a node failure prediction with a lead time and the job on that node, the tree of
seed 003 Fig. 4.2 chooses: live ``migrate`` to a spare node when the lead time covers the
migration time and a spare exists; else a safeguard ``checkpoint`` when the lead time
covers writing a checkpoint to the burst buffer and then the PFS; else nothing (the
failure is imminent and the job restarts from its last periodic checkpoint). Tab. 4.1
says when the periodic schedule shifts (:func:`shift_schedule`). Optionally the warning
is held back for large jobs whose UC(n) (seed 000 Eq. 4.4) exceeds a ceiling. A
migration or checkpoint is taken only when it pays (:func:`break_even`): the failure
probability × the node-hours a failure would destroy must exceed the action's cost.

The streaming decision agent and the cluster simulator both call one
:class:`DecisionPolicy` (the tree per job, FARS when spares are short).
Times are epoch seconds unless a name says ``_h`` (hours) or ``_s`` (seconds).

>>> costs = SiteCosts()
>>> pred = {"node": "n1", "time": 1000.0, "warn": True, "lead_minutes": 5.0,
...         "failure_probability": 0.9, "model": "ensemble"}
>>> job = {"job_id": "42", "nodes": ["n1", "n2"], "num_nodes": 2, "start_time": 0.0,
...        "time_limit_s": 36000, "memory_gb": 64}
>>> [a["kind"] for a in decide(pred, job, spare_nodes=1, costs=costs)]
['migrate']
>>> [a["kind"] for a in decide(pred, job, spare_nodes=0, costs=costs)]
['checkpoint']
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from hpcguard.models.actions import action_id  # re-exported: ids of the actions decided here
from hpcguard.models.checkpoint import multilevel_interval

__all__ = ["action_id", "SiteCosts", "SUMMIT", "job_memory_gb", "job_end_time", "node_hours_at_risk", "break_even", "break_even_age_s", "acted_sigma", "Decision", "DecisionPolicy", "spare_pool_at", "migration_claim", "multilevel_decision", "shift_schedule", "uc_gate", "decide",
           "decide_many", "checkpoint_recommendation", "BRANCHES"]

#: branch names of Fig. 4.2 as they appear in action reasons
BRANCHES = ("migrate:lead>=migration", "checkpoint:lead>=safeguard", "checkpoint:no-spare",
            "none:imminent-failure")


@dataclass(frozen=True)
class SiteCosts:
    """Per-site cost model (defaults: a typical cluster, see :data:`SUMMIT` for seed 003's).

    Migration time = memory to move / inter-node bandwidth (128 GB at 12.5 GB/s ≈ 10 s).
    Safeguard checkpoint time = size / burst-buffer write bandwidth + size / PFS
    bandwidth per node (written one after another, §4.1); without a burst buffer
    (``bb_write_gbs=None``, the default) only the PFS write counts (64 GB at 1 GB/s = 64 s).
    A job may override the memory (``memory_gb``: what its nodes' meminfo reports in
    use) and the checkpoint size (``checkpoint_gb``); the checkpoint is
    ``checkpoint_fraction`` of the node memory only when neither is known.
    """

    node_memory_gb: float = 128.0
    migration_gbs: float = 12.5
    bb_write_gbs: float | None = None
    pfs_write_gbs: float = 1.0
    checkpoint_fraction: float = 0.5  # checkpoint size as a fraction of the node memory when no meminfo is known
    spare_per_migration: int = 1

    def __post_init__(self):
        for name in ("node_memory_gb", "migration_gbs", "pfs_write_gbs", "checkpoint_fraction"):
            if not (getattr(self, name) > 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"SiteCosts.{name} must be finite and > 0")
        if self.bb_write_gbs is not None and not self.bb_write_gbs > 0:
            raise ValueError("SiteCosts.bb_write_gbs must be > 0 or None")

    def migration_seconds(self, memory_gb: float | None = None) -> float:
        """Time to live-migrate one node's memory."""
        mem = self.node_memory_gb if memory_gb is None else float(memory_gb)
        return mem / self.migration_gbs

    def checkpoint_seconds(self, size_gb: float | None = None, memory_gb: float | None = None) -> float:
        """Time to commit a safeguard checkpoint (burst buffer, then PFS): ``size_gb``, else the
        memory in use (``memory_gb``), else ``checkpoint_fraction`` of the node memory."""
        if size_gb is not None:
            size = float(size_gb)
        else:
            size = self.node_memory_gb * self.checkpoint_fraction if memory_gb is None else float(memory_gb)
        bb = 0.0 if self.bb_write_gbs is None else size / self.bb_write_gbs
        return bb + size / self.pfs_write_gbs

    def to_dict(self) -> dict:
        return asdict(self)


#: seed 003's Summit figures (§4.2, §4.4): 512 GB moved at 12.5 GB/s (41 s), a whole-memory checkpoint
#: through a 2.1 GB/s burst buffer and then the PFS (756 s); the cluster simulator's paper reproductions use it
SUMMIT = SiteCosts(node_memory_gb=512.0, migration_gbs=12.5, bb_write_gbs=2.1, pfs_write_gbs=1.0,
                   checkpoint_fraction=1.0)


@dataclass(frozen=True)
class Decision:
    """Outcome of the Fig. 4.2 tree: ``kind`` in migrate/checkpoint/none, the ``branch``
    taken, and the quantities compared."""

    kind: str
    branch: str
    lead_s: float
    migration_s: float
    safeguard_ckpt_s: float
    spare_available: bool

    def to_dict(self) -> dict:
        return asdict(self)


def multilevel_decision(lead_s: float, migration_s: float, safeguard_ckpt_s: float,
                        spare_available: bool) -> Decision:
    """Seed 003 Fig. 4.2 for a predicted failure: migrate ≻ safeguard checkpoint ≻ nothing.

    >>> multilevel_decision(60, 41, 300, True).kind
    'migrate'
    >>> multilevel_decision(60, 41, 30, False).branch
    'checkpoint:no-spare'
    >>> multilevel_decision(20, 41, 30, True).kind
    'none'
    """
    for name, value in (("lead_s", lead_s), ("migration_s", migration_s), ("safeguard_ckpt_s", safeguard_ckpt_s)):
        if not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    args = (float(lead_s), float(migration_s), float(safeguard_ckpt_s), bool(spare_available))
    if lead_s >= migration_s and spare_available:
        return Decision("migrate", BRANCHES[0], *args)
    if lead_s >= safeguard_ckpt_s:
        branch = BRANCHES[2] if lead_s >= migration_s else BRANCHES[1]
        return Decision("checkpoint", branch, *args)
    return Decision("none", BRANCHES[3], *args)


_SCHEDULE_CHANGES = {  # seed 003 Tab. 4.1: (action, phase the failure falls in) -> schedule changes?
    ("migrate", "checkpoint_bb"): True, ("migrate", "bleed_off"): True, ("migrate", "computation"): False,
    ("checkpoint", "checkpoint_bb"): False, ("checkpoint", "bleed_off"): False, ("checkpoint", "computation"): True,
    ("none", "checkpoint_bb"): True, ("none", "bleed_off"): True, ("none", "computation"): True,
}


def shift_schedule(kind: str, phase: str, next_checkpoint: float, action_end: float, interval_s: float) -> float:
    """Next periodic checkpoint time after a proactive action (seed 003 Tab. 4.1, Fig. 4.4).

    ``phase`` is where the predicted failure falls: ``checkpoint_bb``, ``bleed_off`` or
    ``computation``. Unchanged schedules return ``next_checkpoint``. A safeguard
    checkpoint restarts the period at its end; a migration that interrupted a checkpoint
    redoes it when the migration ends; after an (unavoided) failure the period restarts at
    recovery (``action_end``).

    >>> shift_schedule("checkpoint", "computation", 5000.0, 1200.0, 3600.0)
    4800.0
    >>> shift_schedule("migrate", "computation", 5000.0, 1200.0, 3600.0)
    5000.0
    """
    try:
        changes = _SCHEDULE_CHANGES[(kind, phase)]
    except KeyError:
        raise ValueError(f"unknown action/phase {kind!r}/{phase!r}") from None
    if interval_s <= 0:
        raise ValueError("interval_s must be > 0")
    if not changes:
        return float(next_checkpoint)
    if kind == "migrate":
        return float(action_end)
    return float(action_end) + float(interval_s)


def uc_gate(fpr: float, nodes: int, ceiling: float, p_ok: float = 1.0) -> tuple[bool, float]:
    """Allow a warning for a job on ``nodes`` nodes only if UC(fpr, n) <= ``ceiling``.

    UC(n) (seed 000 Eq. 4.4) is the probability that a job on n nodes gets an unnecessary
    checkpoint; it comes from :func:`hpcguard.models.metrics.uc_probability`.
    """
    from hpcguard.models.metrics import uc_probability

    if not 0.0 <= ceiling <= 1.0:
        raise ValueError("ceiling must be in [0, 1]")
    uc = float(uc_probability(fpr, int(nodes), p_ok=p_ok))
    return uc <= ceiling, uc


def _job_nodes(job: dict) -> list[str]:
    nodes = job.get("nodes") or []
    if isinstance(nodes, str):
        nodes = [n for n in nodes.split(",") if n]
    return [str(n) for n in nodes]


def job_memory_gb(job: dict, prediction: dict, costs: SiteCosts) -> float | None:
    """Memory a job holds per node: the job's ``memory_gb``, else what the warned node's
    meminfo reports in use (``mem_usage_percent`` of the prediction × the node memory),
    else ``None`` (the site default applies).

    >>> job_memory_gb({}, {"mem_usage_percent": 25.0}, SiteCosts(node_memory_gb=256))
    64.0
    >>> job_memory_gb({"memory_gb": 10}, {"mem_usage_percent": 25.0}, SiteCosts()), job_memory_gb({}, {}, SiteCosts())
    (10.0, None)
    """
    if job.get("memory_gb") is not None:
        return float(job["memory_gb"])
    pct = prediction.get("mem_usage_percent")
    if pct is None or not math.isfinite(float(pct)):
        return None
    return costs.node_memory_gb * min(max(float(pct), 1.0), 100.0) / 100.0


def job_end_time(job: dict) -> float | None:
    """When the job ends at the latest: ``start_time + time_limit_s``; ``None`` when either is
    unknown (or the limit is not > 0).

    >>> job_end_time({"start_time": 100.0, "time_limit_s": 3600}), job_end_time({"start_time": 100.0})
    (3700.0, None)
    """
    start, limit = job.get("start_time"), job.get("time_limit_s")
    if start is None or limit is None:
        return None
    start, limit = float(start), float(limit)
    if not (limit > 0 and math.isfinite(limit) and math.isfinite(start)):
        return None
    return start + limit


def node_hours_at_risk(kind: str, num_nodes: int, now: float, deadline: float, last_checkpoint: float,
                       job_end: float | None = None) -> float:
    """Node-hours a failure at ``deadline`` would destroy that the action ``kind`` protects.

    Parameters
    ----------
    kind
        ``migrate`` (the job leaves the node before the failure: the work done until the
        failure is kept, ``n (deadline − t_last)``) or ``checkpoint`` (the work done until
        the safeguard checkpoint starts is kept, ``n (now − t_last)``).
    num_nodes, now, deadline, last_checkpoint
        ``n``, the decision time, the predicted failure time and ``t_last`` (epoch s).
    job_end
        When the job ends at the latest (:func:`job_end_time`).  A job that ends after
        ``now`` and at or before the predicted failure is not running when it comes: the
        failure destroys nothing of it and the action protects nothing (issue 55: 15 % of
        the migrations at a 3-year node MTBF were taken for jobs that ended before their
        warned failure).  A job still running at or past its limit (``job_end <= now``:
        a grace period, a stale limit) has no known end, and the work counts.

    Returns
    -------
    float
        Node-hours (≥ 0).

    >>> node_hours_at_risk("migrate", 4, 3600.0, 3900.0, 0.0)
    4.333333333333333
    >>> node_hours_at_risk("checkpoint", 4, 3600.0, 3900.0, 0.0)
    4.0
    >>> node_hours_at_risk("migrate", 4, 3600.0, 3900.0, 0.0, job_end=3800.0)   # gone before the failure
    0.0
    >>> node_hours_at_risk("migrate", 4, 3600.0, 3900.0, 0.0, job_end=3500.0)   # past its limit, still running
    4.333333333333333
    """
    if kind not in ("migrate", "checkpoint"):
        raise ValueError(f"kind must be migrate or checkpoint, got {kind!r}")
    if job_end is not None and now < job_end <= deadline:
        return 0.0
    until = deadline if kind == "migrate" else now
    return int(num_nodes) * max(until - last_checkpoint, 0.0) / 3600.0


def break_even(probability: float, at_risk_node_hours: float, cost_node_hours: float) -> bool:
    """Act only when the expected saving exceeds the action's cost (issue 55's rule).

    ``probability × at_risk_node_hours`` (failure probability × job nodes × hours a
    failure would destroy) against ``cost_node_hours`` (job nodes × the action's time).

    >>> break_even(0.5, 8.0, 1.0), break_even(0.05, 8.0, 1.0)
    (True, False)
    """
    return probability * at_risk_node_hours > cost_node_hours


def break_even_age_s(probability: float, migration_s: float) -> float:
    """Youngest work (s since the last checkpoint, at the failure) a migration pays for.

    :func:`break_even` migrates when ``p n age > n t_mig``, i.e. when the work a failure
    would destroy is older than ``t_mig / p``; ``inf`` when ``p`` is 0.

    >>> break_even_age_s(0.01, 10.0), break_even_age_s(0.0, 10.0)
    (1000.0, inf)
    """
    if not (0.0 <= probability <= 1.0) or not (migration_s >= 0 and math.isfinite(migration_s)):
        raise ValueError("probability must be in [0, 1] and migration_s finite and >= 0")
    return float(migration_s) / probability if probability > 0 else math.inf


def acted_sigma(catch_rate: float, acted_age_h: float, mtbf_h: float, bb_cost_h: float, pfs_cost_h: float = 0.0,
                max_sigma: float = 0.95, max_iter: int = 100) -> tuple[float, float]:
    """Share σ of failures migrated, as the break-even rule acts, and the interval it gives.

    Seed 003's Eq. 5.10 (:func:`hpcguard.models.checkpoint.multilevel_interval`) stretches
    the periodic interval by ``1 / (1 − σ)`` with σ the share of failures live migration
    avoids.  With the break-even rule a warned failure is migrated only when the work it
    would destroy is older than ``acted_age_h`` (:func:`break_even_age_s`); in a job that
    checkpoints every τ that work's age is uniform on ``[0, τ)``, so

    ``σ(τ) = catch_rate × max(0, 1 − acted_age_h / τ)``

    and τ is the fixed point ``τ = t_opt(σ(τ))``, iterated from σ = 0 (both sides grow
    with the other; the iteration climbs to the smallest fixed point).  Issue 55: σ =
    the catch rate (0.81) while the rule declined three warned failures on jobs in four at a
    one-year node MTBF.

    Parameters
    ----------
    catch_rate
        Share of failures warned in time (the predictor's recall).
    acted_age_h
        Break-even age in hours (0: every warned failure is migrated, σ = the catch rate).
    mtbf_h, bb_cost_h, pfs_cost_h
        The job's MTBF and its burst-buffer and PFS checkpoint costs (hours), as for Eq. 5.10.
    max_sigma
        Upper bound on σ (Eq. 5.10 diverges at 1).

    Returns
    -------
    (sigma, interval_h)

    >>> s, tau = acted_sigma(0.8, 0.0, 100.0, 0.01)             # no break-even: σ = the catch rate
    >>> round(s, 3), round(tau, 3)
    (0.8, 3.162)
    >>> s, tau = acted_sigma(0.8, 1.0, 100.0, 0.01)             # young work is not migrated
    >>> round(s, 3), round(tau, 3)
    (0.341, 1.742)
    >>> acted_sigma(0.8, 100.0, 100.0, 0.01)[0]                 # nothing is ever old enough
    0.0
    """
    if not 0.0 <= catch_rate <= 1.0:
        raise ValueError("catch_rate must be in [0, 1]")
    if not acted_age_h >= 0:
        raise ValueError("acted_age_h must be >= 0")
    if not 0.0 <= max_sigma < 1.0:
        raise ValueError("max_sigma must be in [0, 1)")
    cap = min(float(catch_rate), max_sigma)
    sigma = 0.0
    tau = multilevel_interval(mtbf_h, bb_cost_h, pfs_cost_h, sigma=0.0)
    for _ in range(max_iter):
        new = cap * max(0.0, 1.0 - acted_age_h / tau) if math.isfinite(acted_age_h) else 0.0
        tau = multilevel_interval(mtbf_h, bb_cost_h, pfs_cost_h, sigma=new)
        if abs(new - sigma) < 1e-9:
            sigma = new
            break
        sigma = new
    return sigma, tau


def decide(prediction: dict, job: dict | None, spare_nodes: int, costs: SiteCosts,
           ensemble_fpr: float | None = None, uc_ceiling: float | None = None,
           now: float | None = None, apply_break_even: bool = True) -> list[dict]:
    """Actions for one node prediction (the one policy code path of agent and simulator).

    Parameters
    ----------
    prediction
        ``node``, ``time`` (epoch s of the prediction), ``warn``, ``lead_minutes``,
        ``failure_probability``, ``model``; optional ``mem_usage_percent`` (the node's
        meminfo: sizes the checkpoint and the migration).
    job
        The job on the node (``job_id``, ``nodes``, ``num_nodes``, ``start_time``,
        ``time_limit_s``, optional ``last_checkpoint_time``, ``memory_gb``,
        ``checkpoint_gb``) or ``None`` for an idle node (→ ``drain``).
    spare_nodes
        Size of the spare pool (e.g. :func:`hpcguard.models.fars.spare_pool`).
    ensemble_fpr, uc_ceiling
        With both, a warning for a job whose UC(n) exceeds the ceiling is held back
        (no action); otherwise ``uc`` is reported in the reason.
    apply_break_even
        Hold back a migration or checkpoint whose expected saving does not exceed its
        cost (:func:`break_even`).

    Returns
    -------
    list of dict
        Zero or one action: ``kind`` (migrate/checkpoint/drain), ``job_id``, ``nodes``,
        ``deadline`` (predicted failure time), ``source`` ("policy") and ``reason``
        (branch, inputs, lead_minutes, uc if gated, and the value: ``node_hours_at_risk``
        what a failure at the deadline would destroy (:func:`node_hours_at_risk`), migrate
        ``n (deadline − t_last)``, checkpoint ``n (now − t_last)``, 0 when the job's time
        limit ends at or before the deadline, a drain 0 (the jobs it keeps off the node are
        not known yet); ``node_hours_cost`` what the action costs, ``n t/3600`` for its time
        ``t``, a drain the node's hours held until the deadline;
        ``expected_node_hours_saved`` = ``p × at_risk − cost``).
    """
    for key in ("node", "time", "warn", "lead_minutes"):
        if key not in prediction:
            raise ValueError(f"prediction lacks {key!r}")
    if not prediction["warn"]:
        return []
    lead_min = float(prediction["lead_minutes"])
    pred_time = float(prediction["time"])
    if not (lead_min >= 0 and math.isfinite(lead_min) and math.isfinite(pred_time)):
        raise ValueError(f"bad prediction time/lead: {prediction!r}")
    prob = prediction.get("failure_probability")
    prob = 1.0 if prob is None else float(prob)
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"failure_probability must be in [0, 1], got {prob!r}")
    if spare_nodes < 0:
        raise ValueError("spare_nodes must be >= 0")
    now = pred_time if now is None else float(now)
    deadline = pred_time + lead_min * 60.0
    lead_s = max(deadline - now, 0.0)
    node = str(prediction["node"])
    base_reason = {"model": prediction.get("model"), "failure_probability": prob, "lead_minutes": lead_s / 60.0,
                   "predicted_node": node, "sample_time": pred_time}
    if job is None:
        return [{"kind": "drain", "job_id": None, "nodes": [node], "deadline": deadline, "source": "policy",
                 "reason": {**base_reason, "branch": "drain:idle-node", "inputs": {"spare_nodes": int(spare_nodes)},
                            "node_hours_at_risk": 0.0, "node_hours_cost": lead_s / 3600.0,
                            "expected_node_hours_saved": -lead_s / 3600.0}}]
    if "job_id" not in job:
        raise ValueError("job lacks 'job_id'")
    nodes = _job_nodes(job)
    n = int(job.get("num_nodes") or len(nodes) or 1)
    uc_info = {}
    if ensemble_fpr is not None and uc_ceiling is not None:
        allowed, uc = uc_gate(ensemble_fpr, n, uc_ceiling)
        uc_info = {"uc": uc, "uc_ceiling": float(uc_ceiling), "ensemble_fpr": float(ensemble_fpr)}
        if not allowed:
            return []
    memory_gb = job_memory_gb(job, prediction, costs)
    migration_s = costs.migration_seconds(memory_gb)
    safeguard_s = costs.checkpoint_seconds(job.get("checkpoint_gb"), memory_gb)
    decision = multilevel_decision(lead_s, migration_s, safeguard_s, spare_nodes >= costs.spare_per_migration)
    t_last = job.get("last_checkpoint_time")
    t_last = float(job.get("start_time", now) if t_last is None else t_last)
    job_end = job_end_time(job)
    inputs = {"lead_s": lead_s, "migration_s": migration_s, "safeguard_ckpt_s": safeguard_s,
              "spare_nodes": int(spare_nodes), "num_nodes": n, "last_checkpoint_time": t_last,
              "job_end": job_end, "memory_gb": memory_gb, "site_costs": costs.to_dict()}
    reason = {**base_reason, "branch": decision.branch, "inputs": inputs, **uc_info}
    if decision.kind == "none":
        return []
    at_risk = node_hours_at_risk(decision.kind, n, now, deadline, t_last, job_end)
    if decision.kind == "migrate":
        cost = n * migration_s / 3600.0
        act = {"kind": "migrate", "job_id": str(job["job_id"]), "nodes": [node]}
    else:
        cost = n * safeguard_s / 3600.0
        act = {"kind": "checkpoint", "job_id": str(job["job_id"]), "nodes": nodes or [node]}
    worth_it = break_even(prob, at_risk, cost)
    if apply_break_even and not worth_it:
        return []  # it would cost more than it is expected to save: do nothing
    value = {"node_hours_at_risk": at_risk, "node_hours_cost": cost,
             "expected_node_hours_saved": prob * at_risk - cost, "break_even": worth_it}
    return [{**act, "deadline": deadline, "source": "policy", "reason": {**reason, **value}}]


def decide_many(predictions: list[dict], jobs_by_node: dict, spare_nodes: int, costs: SiteCosts,
                precision: float, strategy: str = "sul-d", interval_h: float = 0.5, overhead_h: float | None = None,
                ensemble_fpr: float | None = None, uc_ceiling: float | None = None,
                now: float | None = None, apply_break_even: bool = True) -> list[dict]:
    """Decide for several simultaneous predictions; FARS (seed 001) shares short spares.

    Warned nodes are grouped by job. If the jobs that could migrate need more spare nodes
    than there are, the 0-1 knapsack of :func:`hpcguard.models.fars.select_jobs` (gain
    ``strategy``, predictor ``precision``, FARS interval ``interval_h``, overhead = the
    migration time unless ``overhead_h``) picks which jobs get spares; the others go on
    down the tree without a spare (safeguard checkpoint or nothing). Each job gets at most
    one action (for its earliest predicted failure); a job picked only by the residual
    rule (§4.4, partial spares) counts as without a spare; ``reason`` names ``fars`` when FARS
    chose. Idle predicted nodes are drained.
    """
    from hpcguard.models.fars import select_jobs

    warned = [p for p in predictions if p.get("warn")]
    by_job: dict[str, list[dict]] = {}
    actions: list[dict] = []
    for p in warned:
        job = jobs_by_node.get(str(p["node"]))
        if job is None:
            actions += decide(p, None, spare_nodes, costs, now=now)
        else:
            by_job.setdefault(str(job["job_id"]), []).append(p)
    if not by_job:
        return actions
    jobs = {str(jobs_by_node[str(ps[0]["node"])]["job_id"]): jobs_by_node[str(ps[0]["node"])] for ps in by_job.values()}
    first = {j: min(ps, key=lambda p: float(p["time"]) + 60.0 * float(p["lead_minutes"])) for j, ps in by_job.items()}
    need = {j: len({str(p["node"]) for p in ps}) * costs.spare_per_migration for j, ps in by_job.items()}
    granted = set(by_job)
    fars_info = None
    if sum(need.values()) > spare_nodes:
        t_now = max(float(p["time"]) for p in warned) if now is None else float(now)
        cands = []
        for j, job in jobs.items():
            t_last = job.get("last_checkpoint_time")
            t_last = float(job.get("start_time", t_now) if t_last is None else t_last)
            cands.append({"id": j, "nodes": int(job.get("num_nodes") or len(_job_nodes(job)) or 1),
                          "suspicious_nodes": need[j], "runtime_h": float(job.get("time_limit_s", 3600.0)) / 3600.0,
                          "hours_since_checkpoint": max(t_now - t_last, 0.0) / 3600.0,
                          "requeue_h": job.get("requeue_h"), "restart_h": job.get("restart_h")})
        mig_h = costs.migration_seconds() / 3600.0 if overhead_h is None else overhead_h
        sel = select_jobs(cands, int(spare_nodes), strategy, precision, interval_h, mig_h)
        granted = set(sel.selected) - ({sel.residual} if sel.residual else set())
        fars_info = {"strategy": strategy, "selected": sel.selected, "gain": sel.gain, "spare_nodes": int(spare_nodes)}
    for j, p in sorted(first.items()):
        acts = decide(p, jobs[j], need[j] if j in granted else 0, costs, ensemble_fpr, uc_ceiling, now,
                      apply_break_even)
        for a in acts:
            if fars_info is not None:
                a["reason"]["fars"] = {**fars_info, "granted_spare": j in granted}
            a["reason"]["predicted_nodes"] = sorted({str(q["node"]) for q in by_job[j]})
        actions += acts
    return actions


@dataclass(frozen=True)
class DecisionPolicy:
    """The one decision policy of the streaming agent and the cluster simulator.

    A call decides for the warnings of one moment: the Fig. 4.2 tree (:func:`decide`) per
    job with the site's :class:`SiteCosts`, FARS (seed 001, :func:`decide_many`) sharing
    the spare pool when it is short, UC(n) gating and reporting (seed 000 Eq. 4.4) when the
    predictor's fpr is known. ``spare`` is the FARS spare pool (a list of nodes, e.g.
    :func:`hpcguard.models.fars.spare_pool`, or its size).

    >>> pol = DecisionPolicy(SiteCosts())
    >>> pred = {"node": "n1", "time": 1000.0, "warn": True, "lead_minutes": 2.0}
    >>> job = {"job_id": "42", "nodes": ["n1", "n2"], "start_time": 0.0, "time_limit_s": 3600}
    >>> [(a["kind"], a["reason"]["branch"]) for a in pol([pred], {"n1": job}, spare=["n7"])]
    [('migrate', 'migrate:lead>=migration')]
    >>> [a["kind"] for a in pol([pred], {"n1": job}, spare=[])]  # 120 s lead ≥ a 64 s checkpoint
    ['checkpoint']
    >>> DecisionPolicy(SUMMIT)([pred], {"n1": job}, spare=[])   # 120 s lead < Summit's 756 s checkpoint
    []
    """

    costs: SiteCosts = SiteCosts()
    uc_ceiling: float | None = None
    strategy: str = "sul-d"        # FARS gain when spares are short
    precision: float = 0.7         # the predictor precision FARS's f_i assumes
    interval_h: float = 0.5        # FARS interval I_F
    overhead_h: float | None = None  # FARS O_F; None: the migration time
    break_even: bool = True        # act only when p × node-hours at risk exceeds the action's cost

    def __call__(self, predictions: list[dict], jobs_by_node: dict, spare, fpr: float | None = None,
                 now: float | None = None) -> list[dict]:
        from hpcguard.models.metrics import uc_probability

        n_spare = spare if isinstance(spare, int) else len(spare)
        actions = decide_many(predictions, jobs_by_node, n_spare, self.costs, self.precision, self.strategy,
                              self.interval_h, self.overhead_h, ensemble_fpr=fpr, uc_ceiling=self.uc_ceiling,
                              now=now, apply_break_even=self.break_even)
        if fpr is not None:
            for a in actions:
                if a["job_id"] is not None:  # seed 000 Eq. 4.4: chance this job's warning is unnecessary
                    n = int(a["reason"]["inputs"].get("num_nodes", 1))
                    a["reason"].setdefault("uc", float(uc_probability(fpr, n)))
                a["reason"].setdefault("predictor_fpr", float(fpr))
        return actions


def spare_pool_at(timeline, nodes, warned, t: float, hot_spares=()) -> list[str]:
    """FARS's spare pool at event time ``t`` from a job timeline (:class:`hpcguard.models.jobs.JobTimeline`).

    Idle nodes are ``nodes`` with no job running at ``t``; the queue head is the first job
    queued at ``t``; running jobs free their nodes at ``start_time + time_limit_s`` (jobs
    without a limit never do, for the reservation). ``warned`` nodes are excluded.
    ``hot_spares`` (nodes the batch scheduler never uses, e.g. a Slurm reservation for
    migrations) are spare whenever they are idle and not warned: no queued job can take them.

    >>> from hpcguard.models.jobs import JobTimeline
    >>> tl = JobTimeline().extend([
    ...     {"job_id": "1", "event": "start", "time": 0.0, "nodes": ["n1", "n2"], "time_limit_s": 600},
    ...     {"job_id": "2", "event": "submit", "time": 10.0, "num_nodes": 3}])
    >>> spare_pool_at(tl, ["n1", "n2", "n3", "n4"], {"n4"}, 20.0)   # job 2 will take n3 and both of job 1's
    []
    >>> spare_pool_at(tl, ["n1", "n2", "n3", "n4", "n5"], {"n4"}, 20.0)
    ['n5']
    >>> spare_pool_at(tl, ["n1", "n2", "n3", "n4", "n5"], {"n4"}, 20.0, hot_spares=["n5"])   # held for migrations
    ['n5']
    """
    from hpcguard.models.fars import spare_pool

    hot = set(hot_spares)
    idle = timeline.idle_nodes_at(nodes, t)
    held = sorted((set(idle) & hot) - set(warned))
    idle = [n for n in idle if n not in hot]
    queue = timeline.queued_at(t)
    head_size, releases = 0, []
    if queue:
        head_size = int(queue[0].get("num_nodes") or 1)
        releases = [(float(j["start_time"]) + float(j["time_limit_s"]), len(j["nodes"]))
                    for j in timeline.running_at(t) if j.get("time_limit_s")]
    return held + spare_pool(idle, warned, head_size, releases)


def migration_claim(action: dict, spare: list[str], job: dict | None, t: float) -> dict | None:
    """The spare node a ``migrate`` action takes (the first of the pool) and until when: the job's time limit
    (a day when it has none). Names the target in the action's reason. ``None`` for other actions.

    >>> a = {"kind": "migrate", "job_id": "7", "nodes": ["n1"], "reason": {}}
    >>> migration_claim(a, ["n9"], {"start_time": 0.0, "time_limit_s": 3600}, 600.0), a["reason"]["spare"]
    ({'node': 'n9', 'claimed_from': 600.0, 'claimed_until': 3600.0, 'v': 1}, 'n9')
    """
    if action.get("kind") != "migrate" or not isinstance(spare, (list, tuple)) or not spare:
        return None  # a pool given only by its size (the cluster simulator) names no node
    target = spare[0]
    action.setdefault("reason", {})["spare"] = target
    limit = (job or {}).get("time_limit_s")
    until = float(job["start_time"]) + float(limit) if job and limit and job.get("start_time") is not None else t + 86400.0
    return {"node": target, "claimed_from": float(t), "claimed_until": max(until, float(t) + 1.0), "v": 1}


def checkpoint_recommendation(job: dict, mtbf_h: float, ckpt_cost_h: float, shape: float | None = None,
                              system_nodes: int = 1, now: float | None = None) -> dict:
    """Aware periodic-checkpoint interval for a job at its start (seed 000 Algorithm 1).

    ``mtbf_h`` is the machine MTBF, scaled to the job by Eq. 3.14 with ``system_nodes``;
    the runtime is the job's time limit. Returns a dict with ``job_id``, ``interval_h``
    (``None`` when not checkpointing is cheapest), ``expected_cost_h``,
    ``no_checkpoint``, ``failure_probability``, ``job_mtbf_h``, ``first_checkpoint_time``.
    """
    from hpcguard.models.checkpoint import aware_interval

    if "job_id" not in job or "time_limit_s" not in job:
        raise ValueError("job needs 'job_id' and 'time_limit_s'")
    n = int(job.get("num_nodes") or len(_job_nodes(job)) or 1)
    runtime_h = float(job["time_limit_s"]) / 3600.0
    res = aware_interval(runtime_h, ckpt_cost_h, mtbf_h, shape=shape, nodes=n, system_nodes=max(system_nodes, n))
    start = float(job.get("start_time", now if now is not None else 0.0))
    interval = None if res.no_checkpoint else res.interval_h
    return {"job_id": str(job["job_id"]), "method": "aware", "interval_h": interval,
            "expected_cost_h": res.expected_cost_h, "no_checkpoint": res.no_checkpoint,
            "no_checkpoint_cost_h": res.no_checkpoint_cost_h, "failure_probability": res.failure_probability,
            "job_mtbf_h": res.mtbf_h, "runtime_h": runtime_h, "ckpt_cost_h": float(ckpt_cost_h),
            "first_checkpoint_time": None if interval is None else start + interval * 3600.0,
            "source": "policy"}
