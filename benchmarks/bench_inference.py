"""Batched inference of the failure ensemble on CPU: node predictions per second.

Compares, in the same run and on the same batch, (a) ``FailureEnsemble.predict_batch``
(imputation, normalisation, six 70→52→2 networks as float32 matrix products in blocks
of a fixed number of rows, the LSTM vote and the decision) with (b) a plain numpy lower
bound of the same arithmetic: normalisation, the six networks as one ``(N, 70) @ (70, 6·52)``
matmul + tanh, the block-diagonal output layer, and the 6-step, 4-unit LSTM written out
in numpy.
Also times the whole online path per feature set (``predict_windows``: raw node
histories → features → networks → vote), the worker's cost per node prediction.
Writes JSON to ``benchmarks/results/bench_inference.json``.

    OMP_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824 \
        .venv/bin/python benchmarks/bench_inference.py [--batch 10000] [--repeat 20]

The malloc settings pin glibc's allocator: without them its thresholds adapt to the first large
arrays freed, and the numpy bound's own arrays then come slower or faster with what ran before it
(measured 770 k against 400–540 k predictions/s for the same bound), which moves the ratio.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch


def numpy_lower_bound(ens):
    """Pre-extracted weights → a function computing the same vote probability with numpy."""
    w1 = np.concatenate([n.hidden.weight.detach().numpy().T for n in ens.nets], axis=1)   # (70, 6·52)
    b1 = np.concatenate([n.hidden.bias.detach().numpy() for n in ens.nets])
    w2 = np.stack([n.out.weight.detach().numpy() for n in ens.nets])                      # (6, 2, 52)
    d2 = (w2[:, 1] - w2[:, 0]).astype(np.float32)                                         # logit difference
    b2 = np.array([n.out.bias[1].item() - n.out.bias[0].item() for n in ens.nets], np.float32)
    lstm = ens.voter.lstm
    wih, whh = lstm.weight_ih_l0.detach().numpy(), lstm.weight_hh_l0.detach().numpy()
    bias = (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach().numpy()
    wo, bo = ens.voter.out.weight.detach().numpy(), ens.voter.out.bias.detach().numpy()
    scale = (1.0 / ens.std).astype(np.float32)
    shift = (-ens.mean / ens.std).astype(np.float32)
    seq = list(ens.sequence)
    w1, b1 = w1.astype(np.float32), b1.astype(np.float32)

    def sig(x):
        return 1.0 / (1.0 + np.exp(-x))

    def run(x):
        z = x * scale + shift
        h = np.tanh(z @ w1 + b1).reshape(len(x), 6, -1)
        p = sig(np.einsum("nkh,kh->nk", h, d2) + b2)[:, seq]
        hs = np.zeros((len(x), 4), np.float32)
        cs = np.zeros_like(hs)
        for t in range(6):
            g = p[:, t:t + 1] * wih[:, 0] + hs @ whh.T + bias
            i, f, gg, o = sig(g[:, :4]), sig(g[:, 4:8]), np.tanh(g[:, 8:12]), sig(g[:, 12:])
            cs = f * cs + i * gg
            hs = o * np.tanh(cs)
        logits = hs @ wo.T + bo
        return sig(logits[:, 1] - logits[:, 0])

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_inference.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    from hpcguard.models.failure.ensemble import FailureEnsemble

    rng = np.random.default_rng(0)
    ens = FailureEnsemble.untrained(seed=0)
    ens.mean, ens.std = rng.normal(size=70), rng.uniform(0.5, 2.0, 70)
    x = rng.normal(size=(args.batch, 70)).astype(np.float32)
    lower = numpy_lower_bound(ens)
    # same arithmetic: agree to float32 precision
    err = float(np.abs(lower(x) - ens.predict_batch(x).vote_probability).max())

    def best(fn) -> float:
        fn(x)
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t)
        return min(times)

    t_ens, t_np = best(ens.predict_batch), best(lower)
    result = {"benchmark": "failure-ensemble batched inference", "batch": args.batch, "repeat": args.repeat,
              "threads": 1, "python": platform.python_version(), "torch": torch.__version__,
              "ensemble_predictions_per_s": args.batch / t_ens, "numpy_lower_bound_predictions_per_s": args.batch / t_np,
              "ratio_ensemble_to_lower_bound": (args.batch / t_ens) / (args.batch / t_np),
              "max_abs_difference_vote_probability": err}
    for name in ("paper", "site"):   # raw history → verdict, as the worker calls it
        online = FailureEnsemble(ens.nets, ens.voter, ens.medians, ens.mean, ens.std, features=name)
        hist = rng.normal(50.0, 1.0, size=(args.batch, online.history_steps, 10))
        hist[rng.random(hist.shape) < 0.01] = np.nan
        online.predict_windows(hist)
        times = []
        for _ in range(max(args.repeat // 4, 3)):
            t = time.perf_counter()
            online.predict_windows(hist)
            times.append(time.perf_counter() - t)
        result[f"online_{name}_history_steps"] = online.history_steps
        result[f"online_{name}_predictions_per_s"] = args.batch / min(times)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
