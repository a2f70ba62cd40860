"""Results as JSON can hold them: what the CLI prints with ``--json`` and the reports write.

>>> import numpy as np
>>> jsonable({"tpr": np.float32(0.5), "fpr": float("nan"), "counts": np.array([1, 2]), 3: (1.0, float("inf"))})
{'tpr': 0.5, 'fpr': None, 'counts': [1, 2], '3': [1.0, None]}
"""
from __future__ import annotations

import math
from typing import Any


def jsonable(obj: Any) -> Any:
    """``obj`` with NaN and infinities as ``None``, numpy arrays and scalars as lists and numbers, keys as text."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):
        return jsonable(obj.tolist())
    if hasattr(obj, "item"):
        return jsonable(obj.item())
    return obj
