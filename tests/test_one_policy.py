"""One policy, two callers (issue 12 item 3).

Each row is one warning: the prediction (node, lead), the job on the node, the spare pool
(idle nodes and the queue head whose EASY reservation FARS respects) and the site costs.
The streaming decision agent's path (``streams.decisions.policy_for`` with the job from a
``JobTimeline`` and the pool from ``models.policy.spare_pool_at``) and the cluster
simulator's path (a real simulated cluster in that state, the warning as a predictor
event) must return identical actions.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hpcguard.models.jobs import JobTimeline
from hpcguard.models.policy import SUMMIT, SiteCosts, spare_pool_at
from hpcguard.settings import Settings
from hpcguard.simulators.cluster import ClusterSimulator, Costs, POLICIES
from hpcguard.simulators.failures import FailureTrace, Predictions
from hpcguard.simulators.workload import Workload
from hpcguard.streams.decisions import policy_for

# SUMMIT: 41 s migration, 756 s safeguard checkpoint
SITE_60S = SiteCosts(node_memory_gb=750.0, migration_gbs=12.5, bb_write_gbs=25.0, pfs_write_gbs=25.0,
                     checkpoint_fraction=1.0)
FAIL_AT = 7200.0
RUNTIME = 10 * 3600.0

# (costs, lead_s, cluster nodes, running job size, queued job size or 0, warned node, expected kinds)
ROWS = [
    (SUMMIT, 120.0, 4, 4, 0, 0, []),                      # issue 12: 120 s lead, no spare -> nothing on both paths
    (SUMMIT, 120.0, 6, 4, 0, 0, ["migrate"]),
    (SUMMIT, 30.0, 6, 4, 0, 0, []),                       # lead below the migration time
    (SUMMIT, 900.0, 4, 4, 0, 0, ["checkpoint"]),          # no spare, time for a safeguard checkpoint
    (SITE_60S, 61.0, 4, 4, 0, 0, ["checkpoint"]),
    (SITE_60S, 61.0, 6, 4, 0, 0, ["migrate"]),
    (SITE_60S, 45.0, 6, 4, 0, 0, []),
    (SUMMIT, 300.0, 6, 4, 6, 0, []),                      # both idle nodes held for the queue head's reservation
    (SUMMIT, 300.0, 6, 4, 5, 0, ["migrate"]),             # one idle node is extra: a spare
    (SUMMIT, 300.0, 6, 4, 0, 5, ["drain"]),               # warned idle node
]


def _settings(costs: SiteCosts) -> Settings:
    return Settings().with_overrides(policy=dict(node_memory_gb=costs.node_memory_gb,
                                                 migration_gbs=costs.migration_gbs,
                                                 bb_write_gbs=costs.bb_write_gbs or 0.0,
                                                 pfs_write_gbs=costs.pfs_write_gbs,
                                                 checkpoint_fraction=costs.checkpoint_fraction))


def _simulator_path(costs, lead_s, n_nodes, size, queued, node):
    sizes = [size] + ([queued] if queued else [])
    n = len(sizes)
    wl = Workload(submit=np.arange(n, dtype=float), runtime=np.full(n, RUNTIME), size=np.array(sizes, np.int64),
                  estimate=np.full(n, RUNTIME), io_sensitive=np.zeros(n, bool), io_demand=np.zeros(n),
                  job_id=np.arange(n))
    fl = FailureTrace(np.array([FAIL_AT]), np.array([node], np.int64), np.array([600.0]))
    pr = Predictions(issued=np.array([0.0]), node=np.array([node], np.int64), window_start=np.array([0.0]),
                     window_end=np.array([FAIL_AT + 600.0]), failure_index=np.array([0], np.int64),
                     n_failure_windows=1, lead_s=lead_s)
    # no periodic checkpoints: the agent's job record has no last checkpoint either (both paths see the
    # work since the job's start at risk); the warning tree and break-even rule are those of "multilevel"
    policy = replace(POLICIES["multilevel"], checkpoint="none")
    sim = ClusterSimulator(wl, n_nodes, fl, policy, costs=Costs(site=costs), predictions=pr)
    sim.run()
    return sim.decisions


def _agent_path(costs, lead_s, n_nodes, size, queued, node):
    tl = JobTimeline().extend([
        {"job_id": "0", "event": "submit", "time": 0.0, "num_nodes": size},
        {"job_id": "0", "event": "start", "time": 0.0, "nodes": [str(i) for i in range(size)],
         "time_limit_s": RUNTIME}])
    if queued:
        tl.add({"job_id": "1", "event": "submit", "time": 1.0, "num_nodes": queued})
    t = FAIL_AT - lead_s
    pred = {"node": str(node), "time": t, "sample_time": t, "warn": True, "lead_minutes": lead_s / 60.0,
            "failure_probability": 0.7, "model": "simulator"}
    spare = spare_pool_at(tl, [str(i) for i in range(n_nodes)], {str(node)}, t)
    return policy_for(_settings(costs))(pred, tl.job_at(str(node), t), spare, None)


def _comparable(actions):
    keys = ("lead_s", "migration_s", "safeguard_ckpt_s", "spare_nodes", "num_nodes")
    return [(a["kind"], a["job_id"], a["nodes"], a["deadline"], a["reason"]["branch"],
             {k: a["reason"]["inputs"][k] for k in keys if k in a["reason"]["inputs"]}) for a in actions]


@pytest.mark.parametrize("costs, lead_s, n_nodes, size, queued, node, kinds", ROWS)
def test_agent_and_simulator_take_identical_actions(costs, lead_s, n_nodes, size, queued, node, kinds):
    agent = _agent_path(costs, lead_s, n_nodes, size, queued, node)
    sim = _simulator_path(costs, lead_s, n_nodes, size, queued, node)
    assert [a["kind"] for a in agent] == kinds
    assert _comparable(sim) == _comparable(agent)
