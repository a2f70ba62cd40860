"""A small recorded site and an ensemble whose LSTM votes spread, for the false-alarm budget in the stream.

The networks are untrained (what is checked is that the worker judges exactly as the offline side,
not what the model knows), z-scored on the site's own features so their votes spread; the model's
threshold is the votes' 99th percentile, so the budget controller has false alarms to price in.
A short warm-up and 10-minute epochs make the threshold move within a 3-hour history (two nodes fail).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

BUDGET_CONFIG = """[worker]
false_alarms = 2.0
budget_warmup_node_days = 0.05
budget_epoch_minutes = 10.0
"""


def budget_site(root: Path, nodes: int = 8, hours: float = 3.0, seed: int = 5) -> tuple[str, str, str]:
    """(data directory, model directory, config file) under ``root``."""
    from hpcguard.connectors.model_store import save_model
    from hpcguard.connectors.recorded import load_sensor_grid
    from hpcguard.models.failure.ensemble import FailureEnsemble
    from hpcguard.simulators.telemetry import simulate_telemetry

    data, model, config = root / "data", root / "model", root / "site.toml"
    simulate_telemetry(str(data), nodes=nodes, hours=hours, seed=seed, slurm_events=True)  # sacctmgr's events too
    ens = FailureEnsemble.untrained(seed=0)
    ens.persistence = 2  # as `train failure` sets it: the worker's score reuses each node's previous vote
    values = load_sensor_grid(str(data)).values
    h = ens.history_steps
    windows = np.lib.stride_tricks.sliding_window_view(np.nan_to_num(values, nan=50.0), h, axis=1)[:, ::7]
    features = ens._features(windows.transpose(0, 1, 3, 2).reshape(-1, h, values.shape[2]), 0)
    flat = features.reshape(-1, features.shape[-1])
    ens.mean, ens.std, ens.medians = np.nanmean(flat, 0), np.nanstd(flat, 0) + 1e-6, np.nanmedian(flat, 0)
    votes = ens.online_vote(windows.transpose(0, 1, 3, 2).reshape(-1, h, values.shape[2]))
    ens.threshold = float(np.nanpercentile(votes, 99))
    ens.version = "budget-test"
    save_model(ens, model, {})
    config.write_text(BUDGET_CONFIG)
    return str(data), str(model), str(config)
