"""A trained failure model's measured behaviour as the cluster simulator's predictor (issue 55).

``hpcguard simulate cluster --predictor eval:EVAL.json`` (and ``evaluate policies``) read
the JSON that ``hpcguard evaluate failure --json`` writes and emulate that model on the
simulated failure trace, from its *online* figures (the worker's own operating
threshold, ``online`` in the JSON; ``pooled.online`` when it pooled several ``--data``):

* **catches** — each failure of the trace is warned with probability the model's catch
  rate: its family's (``online.by_family[F].caught / failures``) when the trace knows
  the failure's family and the evaluation saw that family, else the overall rate
  (``online.warned_2min / online.failures``).  A failure counts as caught when it was
  warned at least 2 minutes ahead, as the evaluation counts it.
* **leads** — a caught failure is warned ``lead`` before it, ``lead`` drawn with
  replacement from the measured leads of the warned failures
  (``online.warned_lead_minutes``; an older JSON without the list gives its
  ``median_lead_minutes`` as the only value, and no lead at all falls back to 5 min).
* **false alarms** — a Poisson process at the measured rate of false-alarm episodes per
  node-day (``online.false_alarm_episodes / online.node_days``) over the whole cluster:
  ``Poisson(rate × nodes × horizon days)`` warnings at uniform times on uniformly drawn
  nodes, each with a lead drawn as above (the failure it announces never comes).
* **failure probability** — every warning carries the precision the model has *at the
  simulated failure rate*: with λ the trace's failures per node-day, c the overall catch
  rate and r the false alarms per node-day, ``precision = c λ / (c λ + r)``.  The
  evaluation's own precision is that of its (failure-rich) test history; at a real
  site's rare failures the same false-alarm rate makes a warning far less likely to be
  true, and the break-even rule must see that.  (With per-family rates, c is still the
  overall rate: the trace's family mix is unknown to the warning.)

Example
-------
>>> import numpy as np
>>> from hpcguard.simulators.failures import renewal_failures
>>> m = EvalPredictor(catch_rate=0.8, family_rates={}, leads_s=np.array([120.0, 300.0]),
...                   false_alarms_per_node_day=0.01)
>>> f = renewal_failures(np.random.default_rng(0), nodes=100, horizon_s=100 * 86400, mtbf_h=24 * 50)
>>> p, precision = emulate_eval_predictor(np.random.default_rng(1), m, f, nodes=100, horizon_s=100 * 86400)
>>> 0.5 < precision < 0.7, set(p.lead_each[p.issued > 300].tolist()) == {120.0, 300.0}
(True, True)
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from hpcguard.simulators.failures import FailureTrace, Predictions

DEFAULT_EVAL_LEAD_S = 300.0   # no measured lead at all: the emulated predictors' default


@dataclass(frozen=True)
class EvalPredictor:
    """The measured behaviour of a trained model (see module docstring)."""

    catch_rate: float                       # overall share of failures warned >= 2 min ahead
    family_rates: dict = field(default_factory=dict)   # family -> catch rate
    leads_s: np.ndarray = field(default_factory=lambda: np.array([DEFAULT_EVAL_LEAD_S]))
    false_alarms_per_node_day: float = 0.0
    source: str = ""

    def precision_at(self, failures_per_node_day: float) -> float:
        """Share of warnings that are true at a failure rate of ``failures_per_node_day``."""
        true = self.catch_rate * max(failures_per_node_day, 0.0)
        total = true + self.false_alarms_per_node_day
        return float(true / total) if total > 0 else 0.0

    def to_dict(self) -> dict:
        return {"catch_rate": self.catch_rate, "family_rates": dict(self.family_rates),
                "lead_minutes": [float(x) / 60.0 for x in self.leads_s],
                "false_alarms_per_node_day": self.false_alarms_per_node_day, "source": self.source}


def _number(obj: dict, key: str, path: str) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{path}: 'online.{key}' must be a non-negative number (got {value!r}); "
                         "expected the JSON of `hpcguard evaluate failure --json`")
    return float(value)


def load_eval_predictor(path: str) -> EvalPredictor:
    """Read ``evaluate failure --json`` output; FileNotFoundError / ValueError say what is wrong."""
    if not path:
        raise ValueError("--predictor eval: needs a file, e.g. eval:EVAL.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"predictor evaluation file not found: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc}); expected the output of `hpcguard evaluate failure --json`") \
            from None
    online = data.get("online") if isinstance(data, dict) else None
    if online is None and isinstance(data, dict) and isinstance(data.get("pooled"), dict):
        online = data["pooled"].get("online")        # several --data: the pooled evaluation
    if not isinstance(online, dict):
        raise ValueError(f"{path}: no 'online' object; expected the output of `hpcguard evaluate failure --json` "
                         "(a model evaluated with its online scan)")
    failures = _number(online, "failures", path)
    warned = _number(online, "warned_2min", path)
    node_days = _number(online, "node_days", path)
    episodes = _number(online, "false_alarm_episodes", path)
    if failures <= 0:
        raise ValueError(f"{path}: the evaluation saw no failure, so it measured no catch rate")
    if node_days <= 0:
        raise ValueError(f"{path}: 'online.node_days' must be > 0")
    if warned > failures:
        raise ValueError(f"{path}: more failures warned ({warned:g}) than failures ({failures:g})")
    families = {}
    for name, counts in (online.get("by_family") or {}).items():
        if isinstance(counts, dict) and counts.get("failures"):
            families[str(name)] = float(counts.get("caught", 0)) / float(counts["failures"])
    leads = online.get("warned_lead_minutes")
    if leads is None:
        med = online.get("median_lead_minutes")
        leads = [med] if isinstance(med, (int, float)) and math.isfinite(med) else []
    if not isinstance(leads, list) or not all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0
                                              for x in leads):
        raise ValueError(f"{path}: 'online.warned_lead_minutes' must be a list of non-negative minutes")
    leads_s = np.array([60.0 * float(x) for x in leads]) if leads else np.array([DEFAULT_EVAL_LEAD_S])
    return EvalPredictor(catch_rate=warned / failures, family_rates=families, leads_s=leads_s,
                         false_alarms_per_node_day=episodes / node_days,
                         source=f"eval:{path} (model {data.get('version', '?')})")


def emulate_eval_predictor(rng: np.random.Generator, model: EvalPredictor, failures: FailureTrace, nodes: int,
                           horizon_s: float, family: Optional[np.ndarray] = None) -> tuple[Predictions, float]:
    """Warnings of ``model`` on ``failures`` (see module docstring) and their failure probability.

    ``family`` (one name per failure, "" = unknown) selects the per-family catch rates;
    else the trace's own ``family`` attribute, when it has one.  A warning is issued at
    ``max(failure time - lead, 0)``; ``window_start = window_end`` = the predicted failure
    time, ``lead_each`` the lead actually given.
    """
    if nodes <= 0 or horizon_s <= 0:
        raise ValueError("nodes and horizon must be positive")
    n_fail = len(failures)
    fam = family if family is not None else getattr(failures, "family", None)
    rate = np.full(n_fail, model.catch_rate)
    if fam is not None and model.family_rates:
        for i, f in enumerate(np.asarray(fam, dtype=object).tolist()):
            if f in model.family_rates:
                rate[i] = model.family_rates[f]
    hit = np.flatnonzero(rng.random(n_fail) < rate)
    tp_time = failures.time[hit]
    tp_lead = rng.choice(model.leads_s, size=hit.size) if hit.size else np.zeros(0)
    node_days = nodes * horizon_s / 86400.0
    n_false = int(rng.poisson(model.false_alarms_per_node_day * node_days))
    fa_time = rng.uniform(0.0, horizon_s, size=n_false)
    fa_node = rng.integers(0, nodes, size=n_false)
    fa_lead = rng.choice(model.leads_s, size=n_false) if n_false else np.zeros(0)
    target = np.concatenate([tp_time, fa_time + fa_lead])
    lead = np.concatenate([tp_lead, fa_lead])
    node = np.concatenate([failures.node[hit], fa_node]).astype(np.int64)
    fidx = np.concatenate([hit, np.full(n_false, -1)]).astype(np.int64)
    issued = np.maximum(target - lead, 0.0)
    order = np.argsort(issued, kind="stable")
    pred = Predictions(issued=issued[order], node=node[order], window_start=target[order],
                       window_end=target[order], failure_index=fidx[order], n_failure_windows=n_fail,
                       lead_s=float(np.median(model.leads_s)), lead_each=(target - issued)[order])
    precision = model.precision_at(n_fail / node_days)
    return pred, precision
