"""Synthetic sensor grids with failures and a learnable precursor (tests of the failure ensemble)."""
import numpy as np

T0, GRID = 1_000_000.0, 15.0


def synthetic_grid(seed=0, nodes=12, steps=3000, failures_per_node=3, signal=4.0):
    """Gaussian sensors; before each failure sensor 0 ramps up over 10 minutes; node down 20 min after."""
    rng = np.random.default_rng(seed)
    v = rng.normal(50.0, 1.0, size=(nodes, steps, 10))
    fn, ft = [], []
    for n in range(nodes):
        for s in np.sort(rng.choice(np.arange(200, steps - 100), failures_per_node, replace=False)):
            if any(node == n and abs(s - (t - T0) / GRID) < 200 for node, t in zip(fn, ft)):
                continue
            fn.append(n)
            ft.append(T0 + s * GRID)
            ramp = np.linspace(0.0, 1.0, 40)
            v[n, s - 40:s, 0] += signal * ramp
            v[n, s:s + 80] = np.nan
    return v, np.array(fn), np.array(ft)
