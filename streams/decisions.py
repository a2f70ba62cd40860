"""The decision agent's policy: the same :class:`hpcguard.models.policy.DecisionPolicy`
the cluster simulator calls, configured from ``Settings.policy``.

>>> from hpcguard.settings import Settings
>>> policy = policy_for(Settings())
>>> pred = {"node": "n1", "time": 1000.0, "sample_time": 1000.0, "warn": True, "lead_minutes": 2.0}
>>> job = {"job_id": "42", "nodes": ["n1", "n2"], "start_time": 0.0, "time_limit_s": 3600}
>>> [a["kind"] for a in policy(pred, job, ["n9"], None)], [a["kind"] for a in policy(pred, job, [], None)]
(['migrate'], ['checkpoint'])
"""
from __future__ import annotations

from typing import Any, Callable

from hpcguard.models.policy import DecisionPolicy, SiteCosts, checkpoint_recommendation
from hpcguard.settings import Settings


def site_costs(settings: Settings) -> SiteCosts:
    """The site's cost model (migration and safeguard-checkpoint times) from ``[policy]``."""
    p = settings.policy
    return SiteCosts(node_memory_gb=p.node_memory_gb, migration_gbs=p.migration_gbs,
                     bb_write_gbs=p.bb_write_gbs or None, pfs_write_gbs=p.pfs_write_gbs,
                     checkpoint_fraction=p.checkpoint_fraction)


def decision_policy(settings: Settings) -> DecisionPolicy:
    """The policy object both the worker and ``simulate cluster``/``evaluate policies`` use."""
    return DecisionPolicy(site_costs(settings), uc_ceiling=settings.policy.uc_ceiling or None,
                          break_even=settings.policy.break_even)


def policy_for(settings: Settings) -> Callable[[dict, dict | None, Any, Any], list[dict]]:
    """``policy(prediction, job, spare, predictor) -> action dicts`` for one node warning.

    ``spare`` is the FARS spare pool at the warning's sample time (a node list from
    :func:`hpcguard.models.policy.spare_pool_at`, or its size). Prediction times are
    stream times (the sample the verdict used), so a replay decides exactly as the live
    system would have.
    """
    decide = decision_policy(settings)

    def policy(prediction: dict, job: dict | None, spare: Any, predictor: Any) -> list[dict]:
        p = {**prediction, "time": prediction.get("sample_time") or prediction["time"]}
        jobs = {str(p["node"]): job} if job else {}
        return decide([p], jobs, spare, fpr=getattr(predictor, "fpr", None))

    return policy


def budget_for(settings: Settings, predictor: Any) -> Callable[[], Any] | None:
    """A factory of the per-partition false-alarm budget (:class:`~hpcguard.models.budget_epochs.EpochBudget`)
    ``worker.false_alarms`` asks for, starting from the prior ``train threshold`` stored with the model
    (:func:`~hpcguard.models.budget.primed_by`), else at the model's threshold for a warm-up; ``None`` when the budget is off or
    the predictor's warnings are not one threshold on one score (the baseline, a unanimous vote)."""
    from hpcguard.models.budget import BudgetController, primed_by
    from hpcguard.models.budget_epochs import EpochBudget

    w = settings.worker
    if w.false_alarms <= 0 or not getattr(predictor, "budgetable", False):
        return None
    if predictor.score_floor is None:
        # the lowest threshold the controller sets (its floor, or the model's own while it warms up)
        predictor.score_floor = min(BudgetController().floor, predictor.threshold)

    manifest = getattr(predictor, "metadata", None)

    def primed() -> BudgetController | None:
        # primed by 'train threshold' with the site's calibration history: no warm-up on the model's threshold
        return primed_by(manifest, budget=w.false_alarms, initial=predictor.threshold, step_s=w.grid_s,
                         warmup_node_days=w.budget_warmup_node_days)

    try:
        primed()
    except (KeyError, TypeError, ValueError) as exc:  # a damaged manifest: say so at start, not in an agent
        raise ValueError(f"the model's budget_prior (from 'hpcguard train threshold') cannot be read: {exc!r}; "
                         "run 'train threshold' again") from exc

    def make() -> EpochBudget:
        controller = primed()
        return EpochBudget(budget=w.false_alarms, initial=predictor.threshold, epoch_s=60.0 * w.budget_epoch_minutes,
                           silence_s=w.budget_silence_s, step_s=w.grid_s, warmup_node_days=w.budget_warmup_node_days,
                           controller=controller)

    return make


def hot_spares(settings: Settings) -> list[str]:
    """The site's hot spares (``policy.hot_spares``, a Slurm hostlist): nodes no batch job takes."""
    from hpcguard.connectors.hostlist import expand_hostlist

    return expand_hostlist(settings.policy.hot_spares) if settings.policy.hot_spares.strip() else []


def plan_for(settings: Settings) -> Callable[[dict, int], dict]:
    """``plan(job, system_nodes) -> periodic checkpoint plan`` published at job start."""
    p = settings.policy

    def plan(job: dict, system_nodes: int) -> dict:
        return checkpoint_recommendation(job, mtbf_h=p.mtbf_h, ckpt_cost_h=p.ckpt_cost_h,
                                         system_nodes=p.system_nodes or system_nodes)

    return plan
