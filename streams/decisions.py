"""The decision agent's policy: the same ``models.policy`` functions the cluster
simulator calls, configured from ``Settings.policy``."""
from __future__ import annotations

from typing import Any, Callable

from hpcguard.models.metrics import uc_probability
from hpcguard.models.policy import SiteCosts, checkpoint_recommendation, decide
from hpcguard.settings import Settings


def site_costs(settings: Settings) -> SiteCosts:
    p = settings.policy
    return SiteCosts(node_memory_gb=p.node_memory_gb, migration_gbs=p.migration_gbs,
                     bb_write_gbs=p.bb_write_gbs or None, pfs_write_gbs=p.pfs_write_gbs)


def policy_for(settings: Settings) -> Callable[[dict, dict | None, int, Any], list[dict]]:
    """``policy(prediction, job, spare_nodes, predictor) -> action dicts``.

    Prediction times are stream times (the sample the verdict used), so a replay
    decides exactly as the live system would have.
    """
    costs = site_costs(settings)
    ceiling = settings.policy.uc_ceiling or None

    def policy(prediction: dict, job: dict | None, spare_nodes: int, predictor: Any) -> list[dict]:
        p = {**prediction, "time": prediction.get("sample_time") or prediction["time"]}
        fpr = getattr(predictor, "fpr", None)
        actions = decide(p, job, spare_nodes, costs, ensemble_fpr=fpr, uc_ceiling=ceiling)
        if fpr is not None and job:
            # seed 000 Eq. 4.4: the chance that this job's warning is an unnecessary checkpoint
            n = int(job.get("num_nodes") or len(job.get("nodes") or []) or 1)
            for a in actions:
                a["reason"].setdefault("uc", float(uc_probability(fpr, n)))
                a["reason"].setdefault("predictor_fpr", float(fpr))
        return actions

    return policy


def plan_for(settings: Settings) -> Callable[[dict, int], dict]:
    """``plan(job, system_nodes) -> periodic checkpoint plan`` published at job start."""
    p = settings.policy

    def plan(job: dict, system_nodes: int) -> dict:
        return checkpoint_recommendation(job, mtbf_h=p.mtbf_h, ckpt_cost_h=p.ckpt_cost_h,
                                         system_nodes=p.system_nodes or system_nodes)

    return plan
