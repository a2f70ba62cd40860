"""What the false-alarm budget costs the windows agent per prediction (issue 56 item 2, issue 61).

In one run, on the same node histories of a persistence-2 ensemble (what ``train failure``
ships), times the worker's predictor on 1,000 nodes × one step each (the steady state at
real time):

* ``fixed``: the model's own threshold (``worker.false_alarms = 0``): ``predict_windows``;
* ``budget_recomputed``: the budget's score with every earlier history inferred again;
* ``budget_reused``: the budget's score with each node's previous vote kept by the agent
  (``FailureEnsemble.predict_scored`` with ``earlier``), as the worker runs it.

Writes ``benchmarks/results/bench_budget_score.json``.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_budget_score.py [--nodes 1000] [--repeat 10]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from hpcguard.models.failure.ensemble import FailureEnsemble
from hpcguard.streams.predictors import EnsemblePredictor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ens = FailureEnsemble.untrained(seed=0)
    ens.persistence = 2
    rng = np.random.default_rng(0)
    series = rng.normal(50.0, 1.0, size=(args.nodes, ens.history_steps + 1, 10))
    ens.mean = np.zeros_like(ens.mean)  # votes spread over (0, 1): most rows above the controller's floor
    windows, previous = series[:, 1:], series[:, :-1]
    predictor = EnsemblePredictor(ens, "bench", {})
    nodes = [f"n{i:05d}" for i in range(args.nodes)]
    earlier = predictor.predict(nodes, previous)  # the agent kept these from the previous step
    kept = np.array([[v.failure_probability] for v in earlier])

    def timed(fn) -> float:
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best

    predictor.score_floor = None
    fixed = timed(lambda: predictor.predict(nodes, windows))
    predictor.score_floor = 1e-3
    recomputed = timed(lambda: predictor.predict(nodes, windows))
    reused = timed(lambda: predictor.predict(nodes, windows, kept))
    scores = [v.score for v in predictor.predict(nodes, windows, kept)]
    assert scores == [v.score for v in predictor.predict(nodes, windows)]  # the same scores either way
    out = {"nodes": args.nodes, "persistence": ens.persistence, "repeat": args.repeat,
           "seconds": {"fixed": fixed, "budget_recomputed": recomputed, "budget_reused": reused},
           "ratio_to_fixed": {"budget_recomputed": recomputed / fixed, "budget_reused": reused / fixed},
           "predictions_per_s": {"fixed": args.nodes / fixed, "budget_reused": args.nodes / reused}}
    path = Path(__file__).parent / "results" / "bench_budget_score.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps(out["ratio_to_fixed"]), f"{out['predictions_per_s']['budget_reused']:.0f} predictions/s reused")


if __name__ == "__main__":
    main()
