"""Action identity: deterministic ids so a replay yields the same action ids.

>>> action_id("checkpoint", job_id="42", nodes=["n2", "n1"], trigger="ensemble@1679682808")
'act-3deb054f493b87a71c37'
"""
from __future__ import annotations

import hashlib
from typing import Iterable, Optional


def action_id(kind: str, job_id: Optional[str] = None, nodes: Iterable[str] = (), trigger: str = "") -> str:
    """Hash of what the action does and what triggered it (not of when it was made)."""
    text = "|".join([kind, job_id or "", ",".join(sorted(nodes)), trigger])
    return "act-" + hashlib.sha256(text.encode()).hexdigest()[:20]
