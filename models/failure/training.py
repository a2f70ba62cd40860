"""Training of the failure ensemble (seed 000 §4.3).

* Each lead-time network gets its own random initialisation and is trained on its own
  column of the events (windows ending its lead before the event), with Monte-Carlo
  cross-validation: ``mc_splits`` random stratified train/validation splits, each
  trained with full-batch Adam and early stopping on the validation loss; the split
  with the lowest validation loss gives the network, the mean validation rates over
  the splits are reported.
* Imputation medians and normalisation statistics are learned on the networks'
  training events only (all lead columns pooled).
* The LSTM voter is trained on the networks' outputs for events the networks never
  saw (``voter_fraction`` of the events, plus optional extra healthy ``calibration``
  events from the same training recording), split 60/40 into train/validation; its
  threshold is chosen on the validation ROC (``choose_threshold``).

Everything is seeded; ``torch.set_num_threads(1)`` keeps it polite on shared CPUs.

Example
-------
>>> import numpy as np
>>> from hpcguard.models.failure.dataset import Events
>>> rng = np.random.default_rng(0)
>>> y = (np.arange(330) < 30).astype(np.int8)
>>> X = rng.normal(size=(330, 6, 70)) + 2.0 * y[:, None, None]
>>> ens, report = train_ensemble(Events(X, y, np.zeros(330, int), np.zeros(330)), seed=0, max_epochs=60)
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
from hpcguard.models.metrics import rates


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
        net = LeadNetwork(lead)
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


def train_voter(net_probs_seq: np.ndarray, y: np.ndarray, seed: int = 0, val_fraction: float = 0.4,
                target_fpr: float | None = None, max_epochs: int = 400, patience: int = 40,
                lr: float = 0.02) -> tuple[LstmVoter, dict[str, Any]]:
    """LSTM voter on ``(N, 6)`` network probabilities in vote order; 60/40 train/validation;
    class-balanced loss; threshold chosen on the validation ROC."""
    rng = np.random.default_rng(seed + 1)
    tr, va = stratified_split(y, val_fraction, rng)
    torch.manual_seed(seed * 7919 + 101)
    voter = LstmVoter()
    x = torch.as_tensor(net_probs_seq, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.long)
    counts = np.bincount(y[tr], minlength=2).astype(float)
    weight = torch.as_tensor(counts.sum() / (2 * np.maximum(counts, 1)), dtype=torch.float32)
    _, loss, epoch = _fit(voter, voter.forward, x[tr], yt[tr], x[va], yt[va], weight, max_epochs, patience, lr, 0.0)
    with torch.no_grad():
        scores = voter.failure_probability(x[va]).numpy()
    chosen = choose_threshold(y[va], scores, target_fpr)
    return voter, {"val_loss": loss, "epochs": epoch + 1, "train": int(tr.size), "validation": int(va.size),
                   "validation_failures": int(y[va].sum()), **chosen}


def train_ensemble(events: Events, seed: int = 0, calibration: Events | None = None, voter_fraction: float = 0.3,
                   mc_splits: int = 3, target_fpr: float | None = None, max_epochs: int = 300,
                   progress: Callable[[str], None] | None = None, **info: Any) -> tuple[FailureEnsemble, dict]:
    """Train the six networks and the LSTM voter; returns the ensemble and a training report."""
    torch.set_num_threads(1)
    y = np.asarray(events.labels).astype(np.int64)
    if y.sum() < 4 or (y == 0).sum() < 4:
        raise ValueError(f"too few events to train: {int(y.sum())} failures, {int((y == 0).sum())} ok")
    rng = np.random.default_rng(seed)
    net_idx, vote_idx = stratified_split(y, voter_fraction, rng)
    train_feats = events.features[net_idx]
    medians = learn_imputation(train_feats)
    filled = impute(train_feats, medians).reshape(-1, train_feats.shape[-1])
    mean, std = filled.mean(axis=0), filled.std(axis=0)
    std = np.where(std < 1e-9, 1.0, std)
    ens = FailureEnsemble([], LstmVoter(), medians, mean, std, **{k: v for k, v in info.items()
                                                                  if k in ("grid_s", "window_steps")})
    x_all = ens.normalise(events.features)
    nets, net_reports = [], []
    for i, lead in enumerate((2, 3, 4, 5, 6, 7)[: events.features.shape[1]]):
        if progress:
            progress(f"network {lead} min")
        net, rep = train_network(x_all[net_idx, i], y[net_idx], lead, seed=seed * 100 + i, mc_splits=mc_splits,
                                 max_epochs=max_epochs)
        nets.append(net)
        net_reports.append(rep)
    ens = FailureEnsemble(nets, LstmVoter(), medians, mean, std, **{k: v for k, v in info.items()
                                                                    if k in ("grid_s", "window_steps")})
    voter_feats, voter_y = events.features[vote_idx], y[vote_idx]
    if calibration is not None and len(calibration.labels):
        voter_feats = np.concatenate([voter_feats, calibration.features])
        voter_y = np.concatenate([voter_y, np.asarray(calibration.labels, np.int64)])
    if progress:
        progress("LSTM voter")
    probs = ens.network_probabilities(voter_feats)
    voter, voter_report = train_voter(probs[:, list(ens.sequence)], voter_y, seed=seed, target_fpr=target_fpr)
    ens.voter = voter
    ens.threshold = voter_report["threshold"]
    report = {"seed": seed, "events": int(y.size), "failures": int(y.sum()), "network_events": int(net_idx.size),
              "voter_events": int(voter_y.size), "voter_failures": int(voter_y.sum()),
              "networks": net_reports, "voter": voter_report}
    ens.info = {"training": report}
    return ens, report
