"""A false-alarm budget controller of the vote threshold, at event time (issue 56, item 2).

:class:`BudgetController` sets the threshold the online vote (``FailureEnsemble.online_vote``,
a prediction's ``failure_probability``) is compared with, so that a site gets the false-alarm
*episodes* per 100 node-days its operator allows (``--false-alarms``), learning at event time
from resolved labels, without buying the budget by going silent.  A river estimator
(``river.base.Base``: parameters, ``clone``), with river's small verbs: :meth:`~BudgetController.learn_one`
a resolved node-step, :meth:`~BudgetController.learn_episode` a resolved warning episode,
:meth:`~BudgetController.classify` a vote, :attr:`~BudgetController.threshold`.

What it counts
--------------
An operator is charged per false-alarm episode, not per warned node-step: a run of one node's
warnings no more than ``gap_s`` apart that precedes no failure within ``horizon_s``
(:func:`hpcguard.models.warning_eval.score_warnings`).  Healthy nodes' votes are mostly near 0
with rare, clustered highs (a look-alike lifts one node's vote for minutes), and the trained
voter has a ceiling its votes pile up under; the levels that matter (about one episode per
site-day: ~1e-5 of node-steps) are beyond what a streaming quantile of node-steps estimates
well, and a quantile of node-steps says nothing of how they group into episodes.  So the
controller counts, **exactly and at every threshold at once**, the false-alarm episodes the
past votes would have made:

* a resolved node-step ``(node, time, vote, until_failure)`` (``until_failure``: seconds to the
  node's next failure when it comes within ``horizon_s``; known once ``time + horizon_s`` has
  passed) starts an episode at every level in ``(W, vote]``, ``W`` the node's highest vote in
  ``[time − gap_s, time)`` (a sliding maximum), and continues its episodes at the levels up to
  ``min(vote, W)``;
* an episode is false until one of its node-steps precedes a failure within the horizon; a
  node's live episodes are nested, so one level per node says which are already true;
* the false episodes at level ``t`` are ``#{up ≥ t} − #{down ≥ t}`` over two sorted lists of
  logits (+1 where an episode starts, −1 where one turns out true): the number
  ``score_warnings`` gives for the fixed threshold ``t`` on the same history
  (``tests/test_budget.py`` checks it at random).

It also keeps, per resolved failure, the highest level that warns it ``min_lead_s`` ahead.

The threshold
-------------
Over ``D`` node-days observed, ``budget · D / 100`` episodes were allowed.  Three levels (logits):

* ``full``: the lowest level whose false episodes are at most ``⌊budget · D / 100⌋`` — the
  hindsight-best threshold of the past;
* ``aimed``: the lowest level whose false episodes, and those of every level up to ``span``
  logits above it, are at most ``⌊aim_share · budget · D / 100⌋``.  A level set on the past
  is passed in the future about once more than it was in the past, and a site-day's count is
  Poisson, so aiming at the whole budget breaks it about half the time; ``span`` keeps the
  level off a lucky dip of the (not monotone) counts;
* ``guard``: the highest level that still warns the failures ``full`` warned, but for
  ``max_recall_loss`` of all resolved failures: the controller never buys the budget by going
  silent.

The threshold is ``max(full, min(aimed, guard))`` in logit space, but where the guard is above
the aimed level it goes ``toward_guard`` (half) of the way up to it: a level just above the
highest false alarms seen is broken by the next record (a new day's highest look-alike beats
those of ``n`` past days with chance ``1 / (n + 1)``), while the failures' lowest warning votes
leave room under them (``tests/test_budget.py``'s synthetic sites at 32 nodes × 4 days, seeds
0-11: 11 of 24 over the budget without this margin, none with it).  Plus an optional integral correction
(``gain`` logits per resolved false-alarm episode of the threshold applied, minus ``gain`` per
``100 / aim`` node-days, bounded to ``±max_offset`` and kept under the guard; off by default:
the exact counts left nothing for it to correct on the sites measured).  Until
``warmup_node_days`` are observed the threshold is ``initial`` (the model's own).

The state is JSON (:meth:`~BudgetController.to_state`): lists of floats, no clock, no random
draw.  The same resolved node-steps and episodes in the same order give the same thresholds,
and within one time the order of nodes changes nothing but the rounding of sums.
:func:`replay` runs it over a vote scan offline, labels from ground-truth failures.

Example
-------
>>> import numpy as np
>>> c = BudgetController(budget=2.0, initial=0.9, warmup_node_days=1.0)
>>> rng = np.random.default_rng(0)
>>> for k in range(8 * 5760):                # 8 nodes × a day of 15 s steps: 8 node-days
...     vote = 0.999 if rng.random() < 3e-4 else float(rng.beta(1, 30))   # rare look-alike highs
...     c.learn_one(f"n{k % 8}", 15.0 * (k // 8), vote, until_failure=None)
>>> round(c.node_days, 2), c.false_episodes_at(0.99), c.false_episodes_at(0.9995)
(8.0, 15, 0)
>>> c.threshold > 0.999                      # 0.16 episodes allowed: above the look-alikes
True
>>> import json
>>> d = BudgetController.from_state(json.loads(json.dumps(c.to_state())))
>>> d.threshold == c.threshold
True
"""
from __future__ import annotations

import bisect
import math
from collections import deque
from typing import Any, Iterable

from river import base

STATE_KIND = "hpcguard-budget-controller"
SECONDS_PER_DAY = 86400.0
NEG_INF = float("-inf")
_CLIP = 1e-12
LOWEST = math.log(_CLIP / (1.0 - _CLIP))


def logit(p: float) -> float:
    """``log(p / (1 − p))``, ``p`` clipped into ``[1e-12, 1 − 1e-12]``.

    >>> logit(0.5), round(logit(1.0), 2)
    (0.0, 27.63)
    """
    p = min(max(float(p), _CLIP), 1.0 - _CLIP)
    return math.log(p / (1.0 - p))


def sigmoid(x: float) -> float:
    """The inverse of :func:`logit`.

    >>> sigmoid(0.0), sigmoid(float("inf"))
    (0.5, 1.0)
    """
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


class _Node:
    """One node's live state: its votes of the last ``gap_s`` that no later vote reaches
    (times ascending, logits descending: the sliding maximum) and ``theta``, the level at and
    below which its live episodes already preceded a failure."""

    __slots__ = ("times", "votes", "theta", "failure", "best")

    def __init__(self) -> None:
        self.times: deque[float] = deque()
        self.votes: deque[float] = deque()
        self.theta = NEG_INF
        self.failure: float | None = None   # the failure its latest steps precede
        self.best = LOWEST                  # their highest vote >= min_lead_s before it


class BudgetController(base.Base):
    """Event-time controller of the vote threshold for a false-alarm episode budget.

    Parameters
    ----------
    budget
        False-alarm episodes per 100 node-days the site allows (``--false-alarms``).
    aim_share
        Share of the budget aimed at.  A day's count of false episodes is Poisson and a level
        set on the past is exceeded in the future about once more than it was in the past, so
        aiming at the whole budget breaks it often; aiming lower costs recall (bounded by
        ``max_recall_loss``).
    max_recall_loss
        Share of the resolved failures the aimed level may leave unwarned that the full
        budget's level warns (the guard against buying the budget by going silent).
    horizon_s
        A warning episode is true when its node fails within this after its last warning.
    gap_s
        Warnings of one node no more than this apart are one episode.
    min_lead_s
        A failure counts as warned when a vote at least this before it warns.
    step_s
        Seconds of node-time one resolved node-step stands for (the grid step).
    gain
        Logit added per resolved false-alarm episode of the applied threshold (and taken off
        per ``100 / aim`` node-days); 0 turns the integral correction off.
    max_offset
        Bound of that integral correction (logits, both ways).
    initial
        Threshold until ``warmup_node_days`` are observed (the model's own).
    warmup_node_days
        Node-days to observe before leaving ``initial``.
    floor, ceiling
        Bounds of the threshold.
    keep
        Episode starts kept (the highest); below the lowest kept, counts are not exact and the
        threshold does not go.
    span
        Logits above the aimed level whose counts must keep within the aim too.
    toward_guard
        Share of the way (logits) from the aimed level up to the guard the threshold goes when
        the guard is above it: a margin over the highest false alarms seen (the next one
        breaks their record often), kept off the failures' lowest warning votes.
    """

    def __init__(self, budget: float = 2.0, aim_share: float = 0.5, max_recall_loss: float = 0.05,
                 horizon_s: float = 900.0, gap_s: float = 600.0, min_lead_s: float = 120.0, step_s: float = 15.0,
                 gain: float = 0.0, max_offset: float = 2.0, initial: float = 0.5, warmup_node_days: float = 8.0,
                 floor: float = 1e-3, ceiling: float = 1.0 - 1e-9, keep: int = 20000, span: float = 1.0,
                 toward_guard: float = 0.5):
        if budget <= 0 or not 0 < aim_share <= 1 or not 0 <= max_recall_loss <= 1:
            raise ValueError(f"need budget > 0, 0 < aim_share <= 1, 0 <= max_recall_loss <= 1, got {budget}, "
                             f"{aim_share}, {max_recall_loss}")
        if gap_s > horizon_s:
            raise ValueError("gap_s must not exceed horizon_s")
        if not 0.0 < floor < ceiling < 1.0:
            raise ValueError(f"need 0 < floor < ceiling < 1, got {floor}, {ceiling}")
        if not 0.0 <= toward_guard <= 1.0:
            raise ValueError(f"need 0 <= toward_guard <= 1, got {toward_guard}")
        self.budget = float(budget)
        self.aim_share = float(aim_share)
        self.max_recall_loss = float(max_recall_loss)
        self.horizon_s = float(horizon_s)
        self.gap_s = float(gap_s)
        self.min_lead_s = float(min_lead_s)
        self.step_s = float(step_s)
        self.gain = float(gain)
        self.max_offset = float(max_offset)
        self.initial = float(initial)
        self.warmup_node_days = float(warmup_node_days)
        self.floor = float(floor)
        self.ceiling = float(ceiling)
        self.keep = int(keep)
        self.span = float(span)
        self.toward_guard = float(toward_guard)
        self._nodes: dict[str, _Node] = {}
        self._up: list[float] = []      # logits where a false episode starts counting (+1 at levels <= it)
        self._down: list[float] = []    # logits where one stops (-1 at levels <= it)
        self._cut = NEG_INF             # counts are exact at levels >= this
        self._warned: list[float] = []  # per resolved failure: the highest level that warns it in time
        self.node_days = 0.0
        self.offset = 0.0
        self.steps = 0
        self.false_alarms = 0
        self.true_alarms = 0
        self._cached: float | None = None

    # -- learning ---------------------------------------------------------------------------
    @property
    def aim(self) -> float:
        """False episodes per 100 node-days aimed at."""
        return self.aim_share * self.budget

    def learn_one(self, node: str, time: float, vote: float, until_failure: float | None = None) -> None:
        """A resolved node-step: the vote of ``node`` on its history ending at ``time``, and the
        seconds from ``time`` to the node's next failure when it comes within ``horizon_s``
        (``None``: none does).  Learn it once ``time + horizon_s`` has passed; a node's steps in
        time order."""
        st = self._nodes.get(node)
        if st is None:
            st = self._nodes[node] = _Node()
        x = logit(vote)
        failed = until_failure is not None and 0.0 < until_failure <= self.horizon_s
        failure = time + until_failure if failed else None
        if st.failure is not None and failure != st.failure:    # the failure's lead window is over
            bisect.insort(self._warned, st.best)
            st.failure, st.best = None, LOWEST
            self._cached = None
        if failed:
            st.failure = failure
            if until_failure >= self.min_lead_s and x > st.best:
                st.best = x
        times, votes = st.times, st.votes
        while times and times[0] < time - self.gap_s:        # older than the gap: no longer continued
            times.popleft()
            votes.popleft()
        w = votes[0] if votes else NEG_INF                   # the highest vote within the gap before
        if st.theta > w:
            st.theta = w
        if failed:
            c = min(x, w)
            if c > st.theta:                                 # the false episodes at (theta, c] turn true
                self._add(self._down, c)
                if st.theta > NEG_INF:
                    self._add(self._up, st.theta)
            st.theta = max(st.theta, x)
        elif x > w:                                          # new false episodes at the levels (w, x]
            self._add(self._up, x)
            if w > NEG_INF:
                self._add(self._down, w)
        while votes and votes[-1] <= x:
            times.pop()
            votes.pop()
        times.append(float(time))
        votes.append(x)
        self.steps += 1
        days = self.step_s / SECONDS_PER_DAY
        self.node_days += days
        if self.node_days - days < self.warmup_node_days <= self.node_days:
            self._cached = None
        self._move(-self.gain * self.aim / 100.0 * days)

    def learn_many(self, steps: Iterable[tuple[str, float, float, float | None]]) -> "BudgetController":
        """:meth:`learn_one` on each ``(node, time, vote, until_failure)``."""
        for node, time, vote, until_failure in steps:
            self.learn_one(node, time, vote, until_failure)
        return self

    def learn_history(self, votes, window_end_time, failure_nodes, failure_times, nodes=None) -> "BudgetController":
        """Learn every node-step of a labelled history at once (time, then node order, as :func:`replay`
        feeds them): a site's calibration history, so that the stream starts with its counts (a prior,
        :meth:`prior`) instead of a warm-up on the model's threshold.  ``votes (nodes, steps)`` at
        ``window_end_time`` (NaN: not evaluated); failures as ``(node index, time)``.  Each history
        ends its nodes' episodes: histories of different periods may follow one another.

        >>> import numpy as np
        >>> v = np.full((2, 5760), 0.1); v[0, 100] = 0.95           # one false alarm in 2 node-days
        >>> c = BudgetController(warmup_node_days=1.0).learn_history(v, 15.0 * np.arange(5760), [], [])
        >>> round(c.node_days, 2), c.false_episodes_at(0.9), c.threshold > 0.95
        (2.0, 1, True)
        """
        import numpy as np

        v = np.asarray(votes, float)
        times = np.asarray(window_end_time, float)
        names = [str(n) for n in (nodes if nodes is not None else range(v.shape[0]))]
        lead = until_failure(times, v.shape[0], failure_nodes, failure_times, self.horizon_s)
        order = sorted(range(v.shape[0]), key=lambda i: names[i])
        for k, t in enumerate(times.tolist()):
            col, leads = v[order, k].tolist(), lead[order, k].tolist()
            for n, x, u in zip(order, col, leads):
                if x == x:
                    self.learn_one(names[n], t, x, None if u != u else u)
        for st in self._nodes.values():       # the history ends: a failure's lead window with it
            if st.failure is not None:
                bisect.insort(self._warned, st.best)
        self._nodes.clear()
        self._cached = None
        return self

    def prior(self) -> dict[str, Any]:
        """What :meth:`learn_history` learnt, as JSON (:meth:`to_state` without per-node live votes)."""
        return {**self.to_state(), "nodes": {}}

    @classmethod
    def from_prior(cls, prior: dict[str, Any], **params: Any) -> "BudgetController":
        """A controller that starts from ``prior``'s counts with ``params`` (e.g. the site's ``budget``,
        the worker's ``step_s``) in place of the prior's.  The episode rules (``horizon_s``, ``gap_s``,
        ``min_lead_s``) are the prior's: its counts were made with them.

        >>> import numpy as np
        >>> v = np.full((2, 5760), 0.1); v[0, 100] = 0.95
        >>> p = BudgetController(warmup_node_days=1.0).learn_history(v, 15.0 * np.arange(5760), [], []).prior()
        >>> c = BudgetController.from_prior(p, budget=5.0)
        >>> c.budget, c.node_days > c.warmup_node_days, c.false_episodes_at(0.9)
        (5.0, True, 1)
        """
        fixed = {k: prior["params"][k] for k in ("horizon_s", "gap_s", "min_lead_s") if k in prior["params"]}
        return cls.from_state({**prior, "params": {**prior["params"], **params, **fixed}, "nodes": {}})

    def learn_episode(self, false_alarm: bool) -> None:
        """A resolved warning episode of the threshold applied: a false alarm raises it by ``gain`` logits."""
        if false_alarm:
            self.false_alarms += 1
            self._move(self.gain)
        else:
            self.true_alarms += 1

    def _move(self, step: float) -> None:
        if not step:
            return
        new = min(max(self.offset + step, -self.max_offset), self.max_offset)
        if new != self.offset:
            self.offset = new
            self._cached = None

    def _add(self, into: list[float], x: float) -> None:
        if x < self._cut:
            return
        bisect.insort(into, x)
        self._cached = None
        if len(self._up) > self.keep:                       # keep the highest starts: exact above them
            drop = len(self._up) - self.keep
            self._cut = self._up[drop]
            del self._up[:drop]
            del self._down[:bisect.bisect_left(self._down, self._cut)]

    # -- what it knows ----------------------------------------------------------------------
    def false_episodes_at(self, threshold: float) -> int:
        """False-alarm episodes the fixed threshold ``threshold`` would have made on the resolved steps."""
        x = logit(threshold)
        return (len(self._up) - bisect.bisect_left(self._up, x)) - (len(self._down) - bisect.bisect_left(self._down, x))

    def warned_at(self, threshold: float) -> tuple[int, int]:
        """Resolved failures the fixed threshold ``threshold`` would have warned ``min_lead_s`` ahead, of all."""
        w = self._warned
        return len(w) - bisect.bisect_left(w, logit(threshold)), len(w)

    def _lowest(self, allowed: float, span: float) -> float:
        """Lowest logit level whose false-episode count, and that of every level up to ``span``
        logits above it, is at most ``⌊allowed⌋`` (the lowest level kept when all are).  Counts
        are not monotone: near its ceiling a vote flickers and one look-alike makes several
        episodes; lower, a false episode can join a true one.  ``span = inf``: every higher level."""
        k = math.floor(allowed)
        up, down = self._up, self._down
        i, j, n = len(up) - 1, len(down) - 1, 0
        best, ok, bad = math.inf, True, math.inf    # bad: bottom of the nearest interval above over k
        while i >= 0 or j >= 0:
            x = max(up[i] if i >= 0 else NEG_INF, down[j] if j >= 0 else NEG_INF)
            # the interval just above x (count n) is over or within k; x is its bottom
            if not ok:
                bad = x
            elif bad - x >= span:
                best = math.nextafter(x, math.inf)
            while i >= 0 and up[i] == x:
                n += 1
                i -= 1
            while j >= 0 and down[j] == x:
                n -= 1
                j -= 1
            ok = n <= k
            if n > 2 * k + 20:             # far over: lower levels only count more (ends the search)
                return best
        if ok and bad - self._cut >= span:
            return self._cut
        return best

    def _guard(self, full: float) -> float:
        """Highest logit level that warns the resolved failures level ``full`` warns, but for
        ``max_recall_loss`` of all of them (``+inf`` before any failure, or when none is warned)."""
        w = self._warned
        keep = (len(w) - bisect.bisect_left(w, full)) - math.floor(self.max_recall_loss * len(w))
        return w[len(w) - keep] if keep > 0 else math.inf

    def levels(self) -> dict[str, float] | None:
        """The levels (logits) the threshold comes from: ``full`` (the past's at the whole budget),
        ``aimed`` (at ``aim``), ``guard``; ``None`` during the warm-up."""
        if self.node_days < self.warmup_node_days:
            return None
        full = self._lowest(self.budget * self.node_days / 100.0, 0.0)
        return {"full": full, "aimed": self._lowest(self.aim * self.node_days / 100.0, self.span),
                "guard": self._guard(full)}

    @property
    def threshold(self) -> float:
        """The vote threshold now (a vote >= it warns)."""
        if self._cached is None:
            lv = self.levels()
            if lv is None:
                self._cached = self.initial
            else:
                guard = max(lv["full"], lv["guard"])
                t = max(lv["full"], lv["aimed"])
                if t < guard < math.inf:                 # a margin between the false alarms and the failures
                    t += self.toward_guard * (guard - t)
                t = min(t + self.offset, guard)
                self._cached = min(max(_above(t), self.floor), self.ceiling)
        return self._cached

    def classify(self, vote: float) -> bool:
        """Whether ``vote`` warns at the threshold now."""
        return vote >= self.threshold

    def rate(self) -> float:
        """Resolved false-alarm episodes of the applied threshold per 100 node-days observed."""
        return 100.0 * self.false_alarms / self.node_days if self.node_days else float("nan")

    # -- state ------------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """The whole state as JSON-able data (parameters, counts, per-node live votes)."""
        return {"kind": STATE_KIND, "params": self._get_params(),
                "up": list(self._up), "down": list(self._down), "cut": _num(self._cut), "warned": list(self._warned),
                "node_days": self.node_days, "offset": self.offset, "steps": self.steps,
                "false_alarms": self.false_alarms, "true_alarms": self.true_alarms,
                "nodes": {n: [list(s.times), list(s.votes), _num(s.theta), s.failure, s.best]
                          for n, s in sorted(self._nodes.items())}}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "BudgetController":
        """The controller :meth:`to_state` saved."""
        if state.get("kind") != STATE_KIND:
            raise ValueError(f"not an episode-budget state (kind={state.get('kind')!r})")
        c = cls(**state["params"])
        c._up, c._down = [float(x) for x in state["up"]], [float(x) for x in state["down"]]
        c._cut, c._warned = _unnum(state["cut"]), [float(x) for x in state["warned"]]
        c.node_days, c.offset, c.steps = float(state["node_days"]), float(state["offset"]), int(state["steps"])
        c.false_alarms, c.true_alarms = int(state["false_alarms"]), int(state["true_alarms"])
        for n, (times, votes, theta, failure, best) in state["nodes"].items():
            s = c._nodes[n] = _Node()
            s.times.extend(float(t) for t in times)
            s.votes.extend(float(v) for v in votes)
            s.theta, s.failure, s.best = _unnum(theta), None if failure is None else float(failure), float(best)
        return c


def primed_by(manifest: dict[str, Any] | None, **params: Any) -> BudgetController | None:
    """The controller a model's manifest primes (``metadata.budget_prior``, stored by ``hpcguard train
    threshold``) with ``params`` over the prior's (:meth:`BudgetController.from_prior`); ``None`` when
    the model has no prior (the controller then warms up on the model's threshold).

    >>> primed_by({"metadata": {}}) is None
    True
    """
    meta = (manifest or {}).get("metadata") if isinstance(manifest, dict) else None
    prior = meta.get("budget_prior") if isinstance(meta, dict) else None
    return BudgetController.from_prior(prior, **params) if isinstance(prior, dict) else None


def _above(x: float) -> float:
    """The lowest vote whose logit is at least ``x`` (a level just above a vote stays above it)."""
    p = sigmoid(x)
    while p < 1.0 and logit(p) < x:
        p = math.nextafter(p, 2.0)
    return p


def _num(x: float):
    return None if x == NEG_INF else x


def _unnum(x) -> float:
    return NEG_INF if x is None else float(x)


def until_failure(window_end_time, n_nodes: int, failure_nodes, failure_times, horizon_s: float = 900.0):
    """``(nodes, steps)``: seconds from each step's time to its node's next failure when that comes
    within ``(time, time + horizon_s]``, NaN where none does (the labels of :func:`replay`).

    >>> until_failure([100.0, 200.0, 300.0], 2, [1], [250.0], horizon_s=120.0).tolist()
    [[nan, nan, nan], [nan, 50.0, nan]]
    """
    import numpy as np

    t = np.asarray(window_end_time, float)
    out = np.full((int(n_nodes), t.size), np.nan)
    order = np.argsort(-np.asarray(failure_times, float), kind="stable")      # latest first: the next one wins
    for n, f in zip(np.asarray(failure_nodes, int)[order], np.asarray(failure_times, float)[order]):
        lo, hi = np.searchsorted(t, f - horizon_s, "left"), np.searchsorted(t, f, "left")
        out[n, lo:hi] = f - t[lo:hi]                                     # f − h <= t < f
    return out


def replay(votes, window_end_time, failure_nodes, failure_times, controller: BudgetController,
           horizon_s: float | None = None, gap_s: float | None = None, nodes=None) -> dict[str, Any]:
    """Run ``controller`` over a vote scan in event-time order, labels from the failures.

    ``votes (nodes, steps)`` are the online votes (NaN: not evaluated) at ``window_end_time``.
    At each step time ``T``, first the labels resolved by then are learnt — the node-steps at
    ``<= T − horizon_s`` (time, then node order) and the applied threshold's warning episodes whose
    last warning is ``<= T − horizon_s`` (false: the node did not fail within ``(first, last +
    horizon_s]``) — then the step's votes are judged with the threshold.  ``horizon_s``/``gap_s``:
    the controller's.  Returns ``warn (nodes, steps)``, ``threshold (steps,)`` and ``episodes``
    ``(node index, first, last, false)`` in resolution order.

    >>> import numpy as np
    >>> v = np.full((2, 8), 0.1); v[0, 2] = 0.95
    >>> r = replay(v, 900.0 * np.arange(8), [], [], BudgetController(initial=0.9, warmup_node_days=10.0))
    >>> r["warn"].nonzero(), r["episodes"]
    ((array([0]), array([2])), [(0, 1800.0, 1800.0, True)])
    """
    import numpy as np

    horizon_s = controller.horizon_s if horizon_s is None else float(horizon_s)
    gap_s = controller.gap_s if gap_s is None else float(gap_s)
    v = np.asarray(votes, float)
    times = np.asarray(window_end_time, float)
    names = [str(n) for n in (nodes if nodes is not None else range(v.shape[0]))]
    lead = until_failure(times, v.shape[0], failure_nodes, failure_times, horizon_s)
    fails: dict[int, list[float]] = {}
    for n, f in zip(np.asarray(failure_nodes, int).tolist(), np.asarray(failure_times, float).tolist()):
        fails.setdefault(n, []).append(f)
    fa = {n: np.asarray(f) for n, f in fails.items()}
    order = sorted(range(v.shape[0]), key=lambda i: names[i])
    warn = np.zeros(v.shape, bool)
    thresholds = np.empty(times.size)
    fed = 0
    live: dict[int, list[float]] = {}                    # node -> [first, last] of its open episode
    closed: list[tuple[float, str, int, float, float]] = []
    episodes: list[tuple[int, float, float, bool]] = []
    for k, t in enumerate(times.tolist()):
        while fed < k and times[fed] <= t - horizon_s:
            tt = float(times[fed])
            for n in order:
                x = v[n, fed]
                if x == x:
                    u = lead[n, fed]
                    controller.learn_one(names[n], tt, float(x), None if u != u else float(u))
            fed += 1
        for n in [n for n, (_, last) in live.items() if t - last > gap_s]:
            first, last = live.pop(n)
            closed.append((last + horizon_s, names[n], n, first, last))
        if closed:
            closed.sort()
            while closed and closed[0][0] <= t:
                _, _, n, first, last = closed.pop(0)
                f = fa.get(n)
                false = f is None or not bool(((f > first) & (f <= last + horizon_s)).any())
                controller.learn_episode(false)
                episodes.append((n, first, last, false))
        thr = controller.threshold
        thresholds[k] = thr
        with np.errstate(invalid="ignore"):
            fired = np.flatnonzero(v[:, k] >= thr)
        warn[fired, k] = True
        for n in fired.tolist():
            ep = live.get(n)
            if ep is None:
                live[n] = [t, t]
            else:
                ep[1] = t
    return {"warn": warn, "threshold": thresholds, "episodes": episodes}
