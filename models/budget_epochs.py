"""The budget controller as a stream can run it: thresholds per event-time epoch, labels from silences.

:func:`hpcguard.models.budget.replay` moves the threshold at every step and learns from ground-truth
failures.  A worker sees neither: its predictions of one partition arrive in offset order (nodes
interleaved differently at every replay speed) and a failure is known only when the node goes
silent.  :class:`EpochBudget` is the variant whose answers cannot depend on that order:

* the threshold changes only when the partition's event time enters a new epoch (``epoch_s``);
  every prediction of an epoch is judged with the threshold frozen at its start, also when it
  arrives after later epochs' predictions of other nodes;
* at an epoch's start ``B`` the controller learns the node-steps at or before
  ``B − horizon − silence`` (time, then node order), so each node's steps that old, and whether
  it failed within the horizon after them, are known whatever the arrival order;
* a node fails (a label) at the step after its last prediction when its predictions stop for
  more than ``silence_s``: seen when it comes back, or at an epoch's start when its last
  prediction is older than ``B − silence_s``.

The answers equal for any arrival order in which no node lags another by more than
``silence_s``.  The state is JSON (:meth:`to_state`), for a changelogged table.

Labels (the stream's ``hpcguard.labels``, :meth:`take_labels`, each with a ``label_id`` that names
it whenever it is found): each failure it recognises from a silence, and each warning episode at the thresholds applied (warned steps of one node no more
than the controller's ``gap_s`` apart) resolved ``true`` (a failure followed one of its steps
within ``horizon_s``) or ``false``, once no later step can extend it and its horizon has passed.

Example
-------
>>> import numpy as np
>>> eb = EpochBudget(budget=2.0, initial=0.9, epoch_s=3600.0, warmup_node_days=1.0)
>>> rng = np.random.default_rng(0)
>>> for k in range(2 * 5760):                 # 4 nodes × 2 days of 15 s steps, rare look-alike highs
...     for n in range(4):
...         vote = 0.999 if rng.random() < 3e-4 else float(rng.beta(1, 30))
...         thr = eb.observe(f"n{n}", 15.0 * k, vote)
>>> eb.threshold > 0.999, eb.failures          # the look-alikes are priced in; nobody went silent
(True, {})
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Callable

from hpcguard.models.budget import BudgetController

KIND = "hpcguard.epoch-budget.v1"
KEEP_EPOCHS = 4  # thresholds of this many past epochs are kept for nodes behind the others


class EpochBudget:
    """Per-epoch thresholds from a :class:`~hpcguard.models.budget.BudgetController` fed in event time."""

    def __init__(self, budget: float = 2.0, initial: float = 0.5, epoch_s: float = 3600.0, silence_s: float = 300.0,
                 step_s: float = 15.0, controller: BudgetController | None = None, **controller_params: Any):
        if epoch_s <= 0 or silence_s <= 0:
            raise ValueError(f"need epoch_s > 0 and silence_s > 0, got {epoch_s}, {silence_s}")
        self.controller = controller or BudgetController(budget, initial=initial, step_s=step_s, **controller_params)
        self.epoch_s, self.silence_s, self.step_s = float(epoch_s), float(silence_s), float(step_s)
        self.epoch: float | None = None              # start of the current epoch
        self.threshold = self.controller.threshold
        self.pending: dict[str, list[list[float]]] = {}   # node -> [time, vote] not learnt yet, in time order
        self.last: dict[str, float] = {}             # node -> its newest prediction time
        self.failures: dict[str, list[float]] = {}   # node -> failure times (silences), in order
        self.learned_until = -math.inf
        self.by_epoch: dict[float, float] = {}       # recent epochs' thresholds: for a node behind the others
        self.episodes: dict[str, list] = {}          # node → its open warning episode [start, last, failure time]
        self.reported: dict[str, float] = {}         # node → its newest failure already labelled
        self.labels: list[dict] = []                 # labels not yet taken (take_labels)
        # node → end of its newest step a stream still holds unjudged (None: none); not state, the grid's
        self.held_until: Callable[[str], float | None] | None = None

    def observe(self, node: str, time: float, vote: float) -> float:
        """One prediction of ``node`` at step ``time`` with ``vote`` (NaN: none); the threshold it is judged with."""
        epoch = math.floor(time / self.epoch_s) * self.epoch_s
        if self.epoch is None:
            self.epoch = epoch
            self.by_epoch[epoch] = self.threshold
        elif epoch > self.epoch:
            self._close(epoch)
            self.epoch = epoch
            self.threshold = self.by_epoch[epoch] = self.controller.threshold
            for old in [e for e in self.by_epoch if e < epoch - KEEP_EPOCHS * self.epoch_s]:
                del self.by_epoch[old]
        last = self.last.get(node)
        if last is not None and time - last > self.silence_s:
            self._fail(node, last)
        if last is None or time > last:
            self.last[node] = time
        if vote == vote and time > self.learned_until:
            steps = self.pending.setdefault(node, [])
            if not steps or time > steps[-1][0]:
                steps.append([time, float(vote)])
            else:  # out of order within the node (a redelivery): keep time order, once
                i = bisect.bisect_left([s[0] for s in steps], time)
                if i == len(steps) or steps[i][0] != time:
                    steps.insert(i, [time, float(vote)])
        return self._threshold_of(epoch)

    def _threshold_of(self, epoch: float) -> float:
        # a node behind the others still gets its own epoch's threshold
        return self.by_epoch.get(epoch, self.by_epoch[min(self.by_epoch)] if epoch < self.epoch else self.threshold)

    def take_labels(self) -> list[dict]:
        """The labels recognised since the last call (failures, resolved warning episodes), in order."""
        out, self.labels = self.labels, []
        return out

    def classify(self, node: str, time: float, vote: float) -> bool:
        """:meth:`observe`, then whether the vote reaches the threshold."""
        return bool(vote >= self.observe(node, time, vote))

    def _fail(self, node: str, last: float) -> None:
        at = last + self.step_s  # the first step it did not report
        got = self.failures.setdefault(node, [])
        if at not in got:
            bisect.insort(got, at)
        if at > self.reported.get(node, -math.inf):
            self.reported[node] = at
            self.labels.append({"kind": "failure", "node": node, "time": at, "source": "silence",
                                "label_id": f"failure:{node}:{at:.0f}"})

    def _close(self, boundary: float) -> None:
        for node, last in self.last.items():  # silent by now: failed after its last prediction
            if last < boundary - self.silence_s:
                # a stream holds a stopped node's last steps until it reports again: it failed after those
                held = self.held_until(node) if self.held_until else None
                if held is None or held < boundary - self.silence_s:
                    self._fail(node, max(last, held or last))
        cut = boundary - self.controller.horizon_s - self.silence_s
        steps = []
        for node, ps in self.pending.items():
            k = bisect.bisect_right([p[0] for p in ps], cut)
            steps += [(t, node, v) for t, v in ps[:k]]
            del ps[:k]
        horizon, gap = self.controller.horizon_s, self.controller.gap_s
        for t, node, v in sorted(steps):
            f = self.failures.get(node, [])
            i = bisect.bisect_right(f, t)
            until = f[i] - t if i < len(f) and f[i] - t <= horizon else None
            self.controller.learn_one(node, t, v, until)
            if v >= self._threshold_of(math.floor(t / self.epoch_s) * self.epoch_s):  # warned when judged
                episode = self.episodes.get(node)
                if episode is not None and t - episode[1] > gap:
                    self._resolve(node)
                    episode = None
                if episode is None:
                    episode = self.episodes[node] = [t, t, None]
                episode[1] = t
                if until is not None and episode[2] is None:
                    episode[2] = t + until
        for node in [n for n, e in sorted(self.episodes.items()) if e[1] + gap <= cut]:  # no later step extends it
            self._resolve(node)
        self.learned_until = max(self.learned_until, cut)
        for node in list(self.failures):  # a failure older than every step still to learn labels nothing
            self.failures[node] = [f for f in self.failures[node] if f > cut - horizon]

    def _resolve(self, node: str) -> None:
        start, last, failure = self.episodes.pop(node)
        self.labels.append({"kind": "episode", "node": node, "start": start, "end": last,
                            "outcome": "false" if failure is None else "true", "failure_time": failure,
                            "label_id": f"episode:{node}:{start:.0f}"})

    def to_state(self) -> dict[str, Any]:
        return {"kind": KIND, "controller": self.controller.to_state(), "epoch_s": self.epoch_s,
                "silence_s": self.silence_s, "step_s": self.step_s, "epoch": self.epoch, "threshold": self.threshold,
                "pending": {n: p for n, p in sorted(self.pending.items()) if p}, "last": dict(sorted(self.last.items())),
                "failures": {n: f for n, f in sorted(self.failures.items()) if f},
                "learned_until": None if math.isinf(self.learned_until) else self.learned_until,
                "by_epoch": [[e, t] for e, t in sorted(self.by_epoch.items())],
                "episodes": dict(sorted(self.episodes.items())), "reported": dict(sorted(self.reported.items()))}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "EpochBudget":
        if state.get("kind") != KIND:
            raise ValueError(f"not an epoch-budget state (kind={state.get('kind')!r})")
        eb = cls(epoch_s=state["epoch_s"], silence_s=state["silence_s"], step_s=state["step_s"],
                 controller=BudgetController.from_state(state["controller"]))
        eb.epoch, eb.threshold = state["epoch"], float(state["threshold"])
        eb.pending = {n: [[float(t), float(v)] for t, v in p] for n, p in state["pending"].items()}
        eb.last = {n: float(t) for n, t in state["last"].items()}
        eb.failures = {n: [float(x) for x in f] for n, f in state["failures"].items()}
        eb.learned_until = -math.inf if state["learned_until"] is None else float(state["learned_until"])
        eb.by_epoch = {float(e): float(t) for e, t in state["by_epoch"]}
        eb.episodes = {n: [float(a), float(b), None if f is None else float(f)]
                       for n, (a, b, f) in state.get("episodes", {}).items()}
        eb.reported = {n: float(t) for n, t in state.get("reported", {}).items()}
        return eb


def judge(budget: EpochBudget, node: str, time: float, score: float | None) -> tuple[bool, float]:
    """One verdict under ``budget``: whether ``score`` (``None``/NaN: none) warns, and the threshold it met.

    The worker's windows agent and the offline parity side (``simulators.parity``) both judge with it.

    >>> eb = EpochBudget(initial=0.9)
    >>> judge(eb, "n1", 15.0, 0.95), judge(eb, "n1", 30.0, None)
    ((True, 0.9), (False, 0.9))
    """
    vote = math.nan if score is None else float(score)
    threshold = budget.observe(node, time, vote)
    return bool(vote >= threshold), threshold


def epoch_scan(votes, window_end_time, nodes, budget: EpochBudget):
    """:class:`EpochBudget` over a vote scan ``(nodes, steps)`` (NaN: no prediction), in time then
    node order: ``warn (nodes, steps)`` and the threshold of each step."""
    import numpy as np

    v = np.asarray(votes, float)
    times = np.asarray(window_end_time, float)
    names = [str(n) for n in nodes]
    order = sorted(range(v.shape[0]), key=lambda i: names[i])
    warn = np.zeros(v.shape, bool)
    thresholds = np.empty(times.size)
    for k, t in enumerate(times.tolist()):
        thr = budget.threshold
        for n in order:
            x = v[n, k]
            if x == x:
                thr = budget.observe(names[n], t, float(x))
                warn[n, k] = x >= thr
        thresholds[k] = thr
    return {"warn": warn, "threshold": thresholds}
