"""Training of the failure ensemble (seed 000 §4.3).

* Each lead-time network gets its own random initialisation and is trained on its own
  column of the events (windows ending its lead before the event), with Monte-Carlo
  cross-validation: ``mc_splits`` random stratified train/validation splits, each
  trained with full-batch Adam and early stopping on the validation loss; the split
  with the lowest validation loss gives the network, the mean validation rates over
  the splits are reported.
* Imputation medians and normalisation statistics are learned on the networks'
  training events only (all lead columns pooled).
* Time-based split: the networks learn from the events before the
  ``1 − voter_fraction`` time quantile; the LSTM voter from the networks' outputs on
  the later events (plus optional extra healthy ``calibration`` events of the same
  period), split again in time: its threshold is chosen on the validation ROC of the
  latest events (``choose_threshold``), and the report gives the number of validation
  failures with a Wilson 95 % interval of the chosen tpr — a threshold is only as good
  as the failures it was chosen on.  The fpr of that ROC counts the site's own healthy
  events only (a borrowed history's healthy tail is another site's), each weighed by the
  node-steps it stands for: a hard negative stands for a look-alike's window, a uniform
  draw for its share of the period, so the rate is that of every node-step, as evaluated.
  With ``calibration_span="history"`` that rate counts the healthy events of the whole history
  (calibration events drawn before the voter's period, the networks' own rows left out, and
  the voter's training half) instead of the validation half's alone: a history's last hours
  are one part of the day, and a healthy tail that follows the day's load is not (the
  validation failures alone still give the tpr).

Everything is seeded; ``torch.set_num_threads(1)`` keeps it polite on shared CPUs.

Example
-------
>>> import numpy as np
>>> from hpcguard.models.failure.dataset import Events
>>> rng = np.random.default_rng(0)
>>> y = (np.arange(330) < 30).astype(np.int8)
>>> X = rng.normal(size=(330, 6, 70)) + 2.0 * y[:, None, None]
>>> ens, report = train_ensemble(Events(X, y, np.zeros(330, int), rng.permutation(330) * 15.0),
...                              seed=0, max_epochs=60)
>>> float(ens.predict_batch(X[y == 1]).network_probabilities.mean()) > 0.5
True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from hpcguard.models.failure.dataset import Events, impute, learn_imputation
from hpcguard.models.failure.ensemble import FailureEnsemble
from hpcguard.models.failure.networks import LeadNetwork
from hpcguard.models.failure.voting import LstmVoter, choose_threshold
from hpcguard.models.metrics import rates, wilson_interval


def stratified_split(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices (first, second) with ``fraction`` of each class in the second part."""
    y = np.asarray(labels)
    second = []
    for cls in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == cls))
        k = int(round(fraction * idx.size))
        if idx.size >= 2:
            k = min(max(k, 1), idx.size - 1)
        second.append(idx[:k])
    second_idx = np.sort(np.concatenate(second)) if second else np.zeros(0, int)
    first_idx = np.setdiff1d(np.arange(y.size), second_idx)
    return first_idx, second_idx


def _fit(model: nn.Module, forward: Callable[[torch.Tensor], torch.Tensor], xt, yt, xv, yv, weight,
         max_epochs: int, patience: int, lr: float, weight_decay: float) -> tuple[dict, float, int]:
    """Full-batch Adam with early stopping on validation cross-entropy; returns the best state."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = nn.CrossEntropyLoss(weight=weight)
    best, best_loss, best_epoch, since = None, float("inf"), 0, 0
    for epoch in range(max_epochs):
        model.train()
        opt.zero_grad()
        loss = loss_fn(forward(xt), yt)
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            val = float(loss_fn(forward(xv), yv))
        if val < best_loss - 1e-6:
            best, best_loss, best_epoch, since = {k: v.clone() for k, v in model.state_dict().items()}, val, epoch, 0
        else:
            since += 1
            if since >= patience:
                break
    model.load_state_dict(best)
    return best, best_loss, best_epoch


def train_network(x: np.ndarray, y: np.ndarray, lead: int, seed: int = 0, mc_splits: int = 3,
                  val_fraction: float = 0.2, max_epochs: int = 300, patience: int = 25, lr: float = 0.01,
                  weight_decay: float = 1e-4) -> tuple[LeadNetwork, dict[str, Any]]:
    """Monte-Carlo cross-validated training of one lead network on normalised ``x (N, 70)``."""
    rng = np.random.default_rng(seed)
    best_net, best_loss, cv = None, float("inf"), []
    for split in range(mc_splits):
        tr, va = stratified_split(y, val_fraction, rng)
        torch.manual_seed(seed * 7919 + split)
        net = LeadNetwork(lead, n_inputs=x.shape[1])
        xt, xv = (torch.as_tensor(x[i], dtype=torch.float32) for i in (tr, va))
        yt, yv = (torch.as_tensor(y[i], dtype=torch.long) for i in (tr, va))
        _, loss, epoch = _fit(net, net.forward, xt, yt, xv, yv, None, max_epochs, patience, lr, weight_decay)
        with torch.no_grad():
            pred = net.failure_probability(xv).numpy() > 0.5
        r = rates(y[va], pred)
        cv.append({"split": split, "val_loss": loss, "epochs": epoch + 1, "tpr": r["tpr"], "fpr": r["fpr"]})
        if loss < best_loss:
            best_net, best_loss = net, loss
    summary = {"lead_minutes": lead, "splits": cv, "val_loss": best_loss,
               "cv_tpr": float(np.nanmean([c["tpr"] for c in cv])), "cv_fpr": float(np.nanmean([c["fpr"] for c in cv]))}
    return best_net, summary


def time_split(labels: np.ndarray, times: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Indices (earlier, later): ``later`` holds the events at or after the time by which
    ``1 − fraction`` of the failures have happened (so both parts see failures).

    >>> time_split(np.array([1, 0, 1, 0, 1, 0]), np.array([1., 2., 3., 4., 5., 6.]), 0.34)
    (array([0, 1, 2, 3]), array([4, 5]))
    """
    y, t = np.asarray(labels), np.asarray(times, float)
    ft = np.sort(t[y == 1])
    if ft.size < 2:
        raise ValueError(f"a time-based split needs at least 2 failures, got {ft.size}")
    k = min(max(int(round((1 - fraction) * ft.size)), 1), ft.size - 1)
    cut = ft[k]
    return np.flatnonzero(t < cut), np.flatnonzero(t >= cut)


def _event_keys(events: Events, idx: np.ndarray, block_s: float = 0.25) -> np.ndarray:
    """One integer per event of ``idx``: its history (< 2048), its node (< 65536) and its reference
    time in blocks of ``block_s`` (default: the event itself, to the quarter second)."""
    source, nodes = events.source[idx].astype(np.int64), np.asarray(events.nodes)[idx].astype(np.int64)
    if source.size and (source.max() >= 1 << 11 or nodes.max() >= 1 << 16):
        raise ValueError("event keys hold up to 2048 histories of 65536 nodes")
    return (((source << 16) + nodes) << 36) + np.floor(events.times[idx] / block_s).astype(np.int64)


def voter_period_start(events: Events, fraction: float = 0.35) -> float:
    """Time from which a time-based split gives events to the voter (draw calibration events there)."""
    return float(events.times[time_split(events.labels, events.times, fraction)[1]].min())


def train_voter(net_probs_seq: np.ndarray, y: np.ndarray, seed: int = 0, val_fraction: float = 0.5,
                target_fpr: float | None = None, max_epochs: int = 400, patience: int = 40,
                lr: float = 0.02, times: np.ndarray | None = None,
                ok_weight: np.ndarray | None = None,
                fpr_confidence: float | None = None, rate_from: str = "validation",
                rate_probs: np.ndarray | None = None, rate_weight: np.ndarray | None = None,
                clusters: np.ndarray | None = None,
                rate_clusters: np.ndarray | None = None, histories: np.ndarray | None = None,
                rate_histories: np.ndarray | None = None) -> tuple[LstmVoter, dict[str, Any]]:
    """LSTM voter on ``(N, 6)`` network probabilities in vote order; train/validation split by
    time when ``times`` is given (else stratified random); class-balanced loss; threshold chosen
    on the validation ROC, reported with the validation failures and a Wilson 95 % interval.

    ``ok_weight`` (``(N,)``) weighs each healthy event in the false-positive rate by the
    node-steps it stands for; 0 leaves it out of the rate (learned from only); ``None``: 1 each.
    ``fpr_confidence`` keeps ``target_fpr`` as a ceiling with that confidence (see
    :func:`choose_threshold`).  ``rate_from="all"`` counts every weighted healthy event in the
    false-positive rate (the training half's too: a 4-unit LSTM on six probabilities does not
    learn single events), plus ``rate_probs`` (``(M, 6)``, healthy events the voter never fits)
    weighed by ``rate_weight``; ``"validation"``: the validation half's alone.  The tpr is
    always the validation failures'.  ``clusters`` (``(N,)``, and ``rate_clusters`` for
    ``rate_probs``) make the fpr's bound count runs of false positives, and ``histories`` (and
    ``rate_histories``; which recording each event comes from) the spread of the recordings' own
    rates (see :func:`choose_threshold`)."""
    rng = np.random.default_rng(seed + 1)
    tr, va = (time_split(y, times, val_fraction) if times is not None
              else stratified_split(y, val_fraction, rng))
    torch.manual_seed(seed * 7919 + 101)
    voter = LstmVoter()
    x = torch.as_tensor(net_probs_seq, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.long)
    counts = np.bincount(y[tr], minlength=2).astype(float)
    weight = torch.as_tensor(counts.sum() / (2 * np.maximum(counts, 1)), dtype=torch.float32)
    _, loss, epoch = _fit(voter, voter.forward, x[tr], yt[tr], x[va], yt[va], weight, max_epochs, patience, lr, 0.0)
    if rate_from not in ("validation", "all"):
        raise ValueError(f"rate_from must be 'validation' or 'all', got {rate_from!r}")
    w = np.where(y == 1, 1.0, 1.0 if ok_weight is None else np.asarray(ok_weight, float))
    healthy = np.arange(y.size) if rate_from == "all" else va
    rated = np.concatenate([va[y[va] == 1], healthy[(y[healthy] == 0) & (w[healthy] > 0)]])
    scores = voter.vote(np.asarray(net_probs_seq)[rated])   # as inference computes them
    y_rated, w_rated = y[rated], w[rated]
    c_rated = None if clusters is None else np.asarray(clusters)[rated]
    h_rated = None if histories is None else np.asarray(histories)[rated]
    if rate_probs is not None and len(rate_probs):
        scores = np.concatenate([scores, voter.vote(np.asarray(rate_probs))])
        y_rated = np.concatenate([y_rated, np.zeros(len(rate_probs), y.dtype)])
        w_rated = np.concatenate([w_rated, np.asarray(rate_weight, float)])
        if c_rated is not None:
            c_rated = np.concatenate([c_rated, np.asarray(rate_clusters)])
        if h_rated is not None:
            h_rated = np.concatenate([h_rated, np.asarray(rate_histories)])
    if not (y_rated == 0).any():
        raise ValueError("no weighted healthy event in the voter's validation period to measure the fpr")
    chosen = choose_threshold(y_rated, scores, target_fpr, sample_weight=w_rated, confidence=fpr_confidence,
                              clusters=c_rated, histories=h_rated)
    k_fail, n_fail = int((scores[y_rated == 1] >= chosen["threshold"]).sum()), int(y_rated.sum())
    # the rate's worth in uniform draws
    n_ok, n_eff = int((y_rated == 0).sum()), int(round(chosen.pop("ok_effective")))
    return voter, {"val_loss": loss, "epochs": epoch + 1, "train": int(tr.size),
                   "validation": int((w[va] > 0).sum()),
                   "validation_failures": n_fail, "validation_ok": n_ok, "validation_ok_effective": n_eff,
                   "rate_from": rate_from,
                   "split": "time" if times is not None else "stratified",
                   "tpr_ci95": list(wilson_interval(k_fail, n_fail)),
                   "fpr_ci95": list(wilson_interval(round(chosen["fpr"] * n_eff), n_eff)), **chosen}


def train_ensemble(events: Events, seed: int = 0, calibration: Events | None = None, voter_fraction: float = 0.35,
                   mc_splits: int = 3, target_fpr: float | None = None, fpr_confidence: float | None = None,
                   max_epochs: int = 300,
                   progress: Callable[[str], None] | None = None, split: str = "time",
                   augment: Events | None = None, rated: np.ndarray | None = None,
                   calibration_span: str = "validation", fpr_run_minutes: float | None = None,
                   fpr_history_spread: bool = False, **info: Any) -> tuple[FailureEnsemble, dict]:
    """Train the six networks and the LSTM voter; returns the ensemble and a training report.

    ``split="time"`` (default) splits networks/voter and voter train/validation by event
    time; ``"stratified"`` draws random stratified splits.  ``augment`` adds events to the
    networks' training set only (those of the networks' period with a time split), e.g.
    failure events shifted a few steps earlier: the voter and its threshold see distinct
    failures only (an augmented event's ``time`` is that of the failure it copies).
    The threshold's fpr weighs each healthy event by the node-steps it stands for
    (``Events.node_steps``): the ``calibration`` events and the hard negatives when calibration
    is given (the ok events drawn with the failures stand for a whole history each and would
    count that period twice), else every ok event.  ``rated`` (bool over ``events``, default all)
    leaves events out of that rate: False for a borrowed (simulated) history, which the networks
    and the voter learn from but whose healthy tail is not the site's.  ``calibration_span="history"``
    (time split, with calibration) measures that rate over the whole history: calibration events
    before the voter's period count in it (never fitted by the voter; the networks' own training
    rows left out), and so do the voter's training half's (module docstring).  ``fpr_run_minutes``
    makes the bound of that rate count runs: healthy events of one history's node within the same
    block of that many minutes are one cluster (:func:`choose_threshold`'s ``clusters``).
    ``fpr_history_spread`` makes it count the spread of the rate between the histories
    (``Events.source``; :func:`choose_threshold`'s ``histories``): with one history it changes nothing.
    ``info`` may carry ``grid_s``, ``window_steps``, ``features``, ``persistence``, ``lead_shift``
    and ``encoder`` (the fitted front-end of a learned feature set) for the ensemble.
    """
    torch.set_num_threads(1)
    y = np.asarray(events.labels).astype(np.int64)
    if y.sum() < 4 or (y == 0).sum() < 4:
        raise ValueError(f"too few events to train: {int(y.sum())} failures, {int((y == 0).sum())} ok")
    if split not in ("time", "stratified"):
        raise ValueError(f"split must be 'time' or 'stratified', got {split!r}")
    if calibration_span not in ("validation", "history"):
        raise ValueError(f"calibration_span must be 'validation' or 'history', got {calibration_span!r}")
    rng = np.random.default_rng(seed)
    net_idx, vote_idx = (time_split(y, events.times, voter_fraction) if split == "time"
                         else stratified_split(y, voter_fraction, rng))
    if y[net_idx].sum() < 2 or y[vote_idx].sum() < 2:
        raise ValueError(f"too few failures to split: {int(y[net_idx].sum())} for the networks, "
                         f"{int(y[vote_idx].sum())} for the voter")
    options = {k: v for k, v in info.items()
               if k in ("grid_s", "window_steps", "features", "persistence", "lead_shift", "encoder")}
    train_feats, train_y = events.features[net_idx], y[net_idx]
    if augment is not None and len(augment.labels):
        keep = np.flatnonzero(augment.times < events.times[vote_idx].min()) if split == "time" \
            else np.arange(len(augment.labels))
        train_feats = np.concatenate([train_feats, augment.features[keep]])
        train_y = np.concatenate([train_y, np.asarray(augment.labels[keep], np.int64)])
    medians = learn_imputation(train_feats)
    filled = impute(train_feats, medians).reshape(-1, train_feats.shape[-1])
    mean, std = filled.mean(axis=0), filled.std(axis=0)
    std = np.where(std < 1e-9, 1.0, std)
    ens = FailureEnsemble([], LstmVoter(), medians, mean, std, **options)
    x_net = ens.normalise(train_feats)
    nets, net_reports = [], []
    for i, lead in enumerate((2, 3, 4, 5, 6, 7)[: events.features.shape[1]]):
        if progress:
            progress(f"network {lead} min")
        net, rep = train_network(x_net[:, i], train_y, lead, seed=seed * 100 + i, mc_splits=mc_splits,
                                 max_epochs=max_epochs)
        nets.append(net)
        net_reports.append(rep)
    ens = FailureEnsemble(nets, LstmVoter(), medians, mean, std, **options)
    voter_feats, voter_y, voter_t = events.features[vote_idx], y[vote_idx], events.times[vote_idx]
    own_rows = np.ones(y.size, bool) if rated is None else np.asarray(rated, bool)
    voter_rated = own_rows[vote_idx]
    voter_weight = np.where(voter_rated, events.node_steps[vote_idx], 0.0)
    calibrated = calibration is not None and len(calibration.labels) > 0
    whole = calibrated and calibration_span == "history" and split == "time"
    rate_probs, rate_weight, rate_clusters, rate_histories = None, None, None, None
    voter_clusters = _event_keys(events, vote_idx, 60.0 * fpr_run_minutes) if fpr_run_minutes else None
    voter_histories = events.source[vote_idx] if fpr_history_spread else None
    if calibrated:
        # uniform draws of the period are the calibration's: the ok events drawn with the failures measure no rate
        voter_weight[~events.hard[vote_idx]] = 0.0
        start = voter_t.min()
        later = np.flatnonzero(calibration.times >= start) if split == "time" \
            else np.arange(len(calibration.labels))
        voter_feats = np.concatenate([voter_feats, calibration.features[later]])
        voter_y = np.concatenate([voter_y, np.asarray(calibration.labels[later], np.int64)])
        voter_t = np.concatenate([voter_t, calibration.times[later]])
        voter_weight = np.concatenate([voter_weight, calibration.node_steps[later]])
        if fpr_run_minutes:
            voter_clusters = np.concatenate([voter_clusters, _event_keys(calibration, later, 60.0 * fpr_run_minutes)])
        if fpr_history_spread:
            voter_histories = np.concatenate([voter_histories, calibration.source[later]])
        if whole:
            earlier = np.flatnonzero((calibration.times < start) & (calibration.labels == 0))
            own = net_idx[(y[net_idx] == 0) & own_rows[net_idx]]
            earlier = earlier[~np.isin(_event_keys(calibration, earlier), _event_keys(events, own))]
            rate_probs = ens.network_probabilities(calibration.features[earlier])[:, list(ens.sequence)]
            rate_weight = calibration.node_steps[earlier]
            if fpr_run_minutes:
                rate_clusters = _event_keys(calibration, earlier, 60.0 * fpr_run_minutes)
            if fpr_history_spread:
                rate_histories = calibration.source[earlier]
    if progress:
        progress("LSTM voter")
    probs = ens.network_probabilities(voter_feats)
    voter, voter_report = train_voter(probs[:, list(ens.sequence)], voter_y, seed=seed, target_fpr=target_fpr,
                                      fpr_confidence=fpr_confidence,
                                      times=voter_t if split == "time" else None,
                                      ok_weight=voter_weight, rate_from="all" if whole else "validation",
                                      rate_probs=rate_probs, rate_weight=rate_weight,
                                      clusters=voter_clusters, rate_clusters=rate_clusters,
                                      histories=voter_histories, rate_histories=rate_histories)
    ens.voter = voter
    ens.threshold = voter_report["threshold"]
    report = {"seed": seed, "events": int(y.size), "failures": int(y.sum()), "network_events": int(train_y.size),
              "network_failure_events": int(train_y.sum()),
              "voter_events": int(voter_y.size), "voter_failures": int(voter_y.sum()),
              "networks": net_reports, "voter": voter_report}
    ens.info = {"training": report}
    return ens, report
