"""Read and write failure-ensemble model directories.

A model directory is self-describing::

    MODEL_DIR/manifest.json   kind, version, sensors, feature set (``features``,
                              ``feature_names``, ``history_steps``, ``persistence``), window
                              and lead parameters, vote, thresholds, imputation medians,
                              normalisation statistics, metrics (``metrics.lstm.fpr``,
                              validation failures and the tpr's 95 % interval ...), metadata
                              (training-data digest sha256, sensor-map digest
                              ``sensor_map_sha256``, per-sensor ``coverage`` and its
                              warnings, missing sensors, data directories, seed)
    MODEL_DIR/weights.pt      torch state dicts of the six networks, the LSTM voter and, for
                              the learned ``conv`` feature set, its encoder
    MODEL_DIR/metrics.json    training / validation metrics

Example
-------
>>> import tempfile
>>> from hpcguard.models.failure.ensemble import FailureEnsemble
>>> d = tempfile.mkdtemp()
>>> _ = save_model(FailureEnsemble.untrained(), d, {"note": "doctest"})
>>> ens, meta = load_model(d)
>>> meta["kind"], len(ens.nets)
('hpcguard-failure-ensemble', 6)
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

MANIFEST = "manifest.json"
WEIGHTS = "weights.pt"
METRICS = "metrics.json"


def digest_files(paths: Iterable[str | Path]) -> str:
    """sha256 over the bytes of the given files (sorted by path) and their relative names."""
    h = hashlib.sha256()
    for p in sorted(Path(x) for x in paths):
        h.update(str(p.name).encode())
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def digest_dirs(dirs: Iterable[str | Path]) -> str:
    """sha256 over every regular file under the data directories."""
    files = [f for d in dirs for f in sorted(Path(d).rglob("*")) if f.is_file()]
    return digest_files(files)


# the code a trained model depends on: the simulator that wrote its data and the model packages
MODEL_CODE = ("simulators/telemetry.py", "simulators/writers.py", "simulators/profiles.py", "simulators/failures.py",
              "models/features.py",
              "models/baseline.py", "models/failure/*.py", "connectors/recorded.py", "connectors/model_store.py",
              "simulators/failure_training.py")


def code_digest() -> str:
    """12-hex digest of :data:`MODEL_CODE` as installed: a model cached under it is retrained when that code
    changes (a feature set that gains a statistic, a simulator fix)."""
    root = Path(__file__).resolve().parent.parent
    return digest_files(f for pattern in MODEL_CODE for f in root.glob(pattern))[:12]


def cache_root(explicit: str | None = None) -> Path:
    """``explicit`` (a ``--cache-dir``), else ``$HPCGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/hpcguard``
    (~/.cache/hpcguard): where the demo's models and the simulated prior histories are kept."""
    if explicit:
        return Path(explicit)
    if os.environ.get("HPCGUARD_CACHE_DIR"):
        return Path(os.environ["HPCGUARD_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hpcguard"


def save_model(ensemble: Any, out_dir: str | Path, metadata: dict[str, Any] | None = None) -> Path:
    """Write ``ensemble.to_state()`` and ``metadata`` to ``out_dir`` (created)."""
    import torch

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = ensemble.to_state()
    metrics = (metadata or {}).get("metrics", {})
    manifest = {**state["config"], "metrics": metrics, "metadata": {k: v for k, v in (metadata or {}).items()
                                                                    if k != "metrics"},
                "files": {"weights": WEIGHTS, "metrics": METRICS}}
    torch.save(state["weights"], out / WEIGHTS)
    (out / METRICS).write_text(json.dumps(metrics or state["config"].get("info", {}), indent=2, default=float))
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, default=float))
    return out


def load_model(model_dir: str | Path) -> tuple[Any, dict[str, Any]]:
    """Load ``(FailureEnsemble, manifest)`` from a model directory; clear errors otherwise."""
    import torch

    from hpcguard.models.failure.ensemble import FailureEnsemble

    d = Path(model_dir)
    if not (d / MANIFEST).is_file():
        raise FileNotFoundError(f"{d} is not a failure-ensemble model directory (no {MANIFEST})")
    if not (d / WEIGHTS).is_file():
        raise FileNotFoundError(f"{d / WEIGHTS} is missing")
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{d / MANIFEST} is not valid JSON: {exc}") from exc
    weights = torch.load(d / WEIGHTS, map_location="cpu", weights_only=True)
    config = {k: v for k, v in manifest.items() if k not in ("metadata", "files", "metrics")}
    ensemble = FailureEnsemble.from_state({"config": config, "weights": weights})
    return ensemble, manifest
