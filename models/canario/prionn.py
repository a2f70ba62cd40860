"""PRIONN job-script mapping and 2D CNN for IO-sensitivity prediction (seed 004 ch. 3, §4.4).

The whole batch script is mapped character by character onto a fixed 64 × 64 grid
(rows = lines, columns = characters; shorter scripts are padded with spaces, longer
ones cropped, §3.2.4), preserving the 2D structure of the text.  Characters become
pixels by the *simple* (ASCII code) or *binary* (space → 0, other → 1)
transformation; the CNN embeds each ASCII code into a learned 8-value vector (the
8-dimensional character vectors PRIONN obtained with word2vec) before its 2D
convolutions, and its output layer is the binary IO-sensitive / IO-resistant choice.

Training follows §3.2.3 / §4.4: the 500 most recently completed labelled jobs,
retrained (weights kept, not re-initialised) after every 100 new completions.

Example
-------
>>> codes = script_to_codes("#!/bin/bash\\nsrun ./a.out\\n")
>>> codes.shape, int(codes[1, 0]), int(codes[5, 5])
((64, 64), 115, 32)
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, Sequence

import numpy as np

ROWS = COLS = 64
N_CODES = 128  # ASCII; anything else maps to 127


def script_to_codes(text: str, rows: int = ROWS, cols: int = COLS) -> np.ndarray:
    """ASCII codes of ``text`` on a ``rows × cols`` grid, space-padded and cropped."""
    if not isinstance(text, str):
        raise TypeError(f"job script must be str, got {type(text).__name__}")
    grid = np.full((rows, cols), 32, np.uint8)
    for r, line in enumerate(text.splitlines()[:rows]):
        raw = np.frombuffer(line[:cols].encode("utf-32-le"), dtype="<u4")
        grid[r, : raw.size] = np.where(raw < N_CODES, raw, N_CODES - 1).astype(np.uint8)
    return grid


def scripts_to_codes(texts: Iterable[str], rows: int = ROWS, cols: int = COLS) -> np.ndarray:
    """Stack of :func:`script_to_codes`, shape ``(n, rows, cols)``."""
    grids = [script_to_codes(t, rows, cols) for t in texts]
    return np.stack(grids) if grids else np.empty((0, rows, cols), np.uint8)


def codes_to_pixels(codes: np.ndarray, mapping: str = "simple") -> np.ndarray:
    """PRIONN's lossless *simple* (code / 127) or lossy *binary* (non-space = 1) pixels.

    >>> codes_to_pixels(script_to_codes("a b"), "binary")[0, :4].tolist()
    [1.0, 0.0, 1.0, 0.0]
    """
    codes = np.asarray(codes)
    if mapping == "simple":
        return codes.astype(np.float32) / (N_CODES - 1)
    if mapping == "binary":
        return ((codes != 32) & (codes != 9)).astype(np.float32)
    raise ValueError(f"unknown mapping {mapping!r}; use 'simple' or 'binary'")


def _network(embed_dim: int = 8):
    import torch.nn as nn

    class PrionnCNN(nn.Module):
        """Embedding(128→8) → 2 × (Conv2d 3×3, ReLU, MaxPool) → [flatten ‖ global max-pool] → FC 64 → 2.

        The flattened map keeps where patterns sit in the script (its 2D layout); the
        global max-pool lets a pattern (a Lustre path, an IO library) count wherever it is.
        """

        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(N_CODES, embed_dim)
            self.features = nn.Sequential(
                nn.Conv2d(embed_dim, 16, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.pool = nn.AdaptiveMaxPool2d(1)
            self.head = nn.Sequential(nn.Linear(32 * (ROWS // 8) * (COLS // 8) + 32, 64), nn.ReLU(),
                                      nn.Linear(64, 2))

        def forward(self, codes):
            import torch

            x = self.features(self.embed(codes.long()).permute(0, 3, 1, 2))  # (n, 32, rows/8, cols/8)
            return self.head(torch.cat([x.flatten(1), self.pool(x).flatten(1)], 1))

    return PrionnCNN()


class JobSensitivityClassifier:
    """Predict a job's IO sensitivity from its script text with PRIONN's 2D CNN.

    Parameters
    ----------
    train_size
        Train on the most recent ``train_size`` labelled completions (500).
    retrain_every
        :meth:`learn_one` retrains after this many new completions (100).
    min_train
        No model before this many labelled jobs (100, §4.4).
    epochs, warm_epochs
        Epochs of the first training and of each later retraining (weights are kept).
    """

    def __init__(self, train_size: int = 500, retrain_every: int = 100, min_train: int = 100, epochs: int = 8,
                 warm_epochs: int = 3, batch_size: int = 32, lr: float = 2e-3, seed: int = 0,
                 n_threads: int = 1) -> None:
        import torch

        torch.set_num_threads(n_threads)
        torch.manual_seed(seed)
        self.train_size = train_size
        self.retrain_every = retrain_every
        self.min_train = min_train
        self.epochs = epochs
        self.warm_epochs = warm_epochs
        self.batch_size = batch_size
        self.lr = lr
        self._gen = torch.Generator().manual_seed(seed)
        self._net = _network()
        self._opt = torch.optim.Adam(self._net.parameters(), lr=lr)
        self._buffer: deque = deque(maxlen=train_size)
        self._since_train = 0
        self.n_trainings = 0

    @property
    def trained(self) -> bool:
        return self.n_trainings > 0

    def learn_one(self, script: str, sensitive: bool) -> bool:
        """Buffer one labelled completion; retrain when due. Returns True if it retrained."""
        self._buffer.append((script_to_codes(script), int(bool(sensitive))))
        self._since_train += 1
        due = self._since_train >= self.retrain_every or (not self.trained and len(self._buffer) >= self.min_train)
        if due and len(self._buffer) >= self.min_train:
            codes, labels = zip(*self._buffer)
            self._fit(np.stack(codes), np.array(labels))
            return True
        return False

    def learn_many(self, scripts: Sequence[str], sensitive: Sequence[bool]) -> None:
        """Train on the last ``train_size`` of ``scripts`` (continuing from the current weights)."""
        scripts = list(scripts)[-self.train_size:]
        labels = np.asarray(sensitive, int)[-self.train_size:]
        if len(scripts) != labels.size:
            raise ValueError("scripts and labels differ in length")
        if not scripts:
            raise ValueError("no training jobs")
        self._buffer.extend(zip(scripts_to_codes(scripts), labels.tolist()))
        self._fit(scripts_to_codes(scripts), labels)

    def _fit(self, codes: np.ndarray, labels: np.ndarray) -> None:
        import torch

        x = torch.as_tensor(codes)
        y = torch.as_tensor(labels, dtype=torch.long)
        counts = np.bincount(labels, minlength=2).astype(float)
        weight = torch.as_tensor(counts.sum() / np.maximum(counts, 1) / 2, dtype=torch.float32)
        loss_fn = torch.nn.CrossEntropyLoss(weight=weight)
        self._net.train()
        for _ in range(self.epochs if not self.trained else self.warm_epochs):
            order = torch.randperm(len(y), generator=self._gen)
            for i in range(0, len(y), self.batch_size):
                idx = order[i:i + self.batch_size]
                self._opt.zero_grad()
                loss_fn(self._net(x[idx]), y[idx]).backward()
                self._opt.step()
        self.n_trainings += 1
        self._since_train = 0

    _PARAMS = ("train_size", "retrain_every", "min_train", "epochs", "warm_epochs", "batch_size", "lr")

    def to_bytes(self) -> bytes:
        """The classifier's whole state (settings, CNN and optimiser weights, training buffer) as bytes.

        Serialised with ``torch.save`` as tensors and plain values only, so :meth:`from_bytes`
        loads it with ``weights_only=True`` (no arbitrary pickles).

        >>> clf = JobSensitivityClassifier(min_train=2, epochs=1)
        >>> clf.learn_many(["srun ./xhpl", "lfs setstripe /p/lustre1"], [False, True])
        >>> twin = JobSensitivityClassifier.from_bytes(clf.to_bytes())
        >>> twin.trained, round(twin.predict_one("srun ./xhpl"), 6) == round(clf.predict_one("srun ./xhpl"), 6)
        (True, True)
        """
        import io

        import torch

        codes = [c for c, _ in self._buffer]
        state = {"params": {k: getattr(self, k) for k in self._PARAMS}, "n_trainings": self.n_trainings,
                 "since_train": self._since_train, "net": self._net.state_dict(), "optimizer": self._opt.state_dict(),
                 "buffer_codes": torch.as_tensor(np.stack(codes) if codes else np.empty((0, ROWS, COLS), np.uint8)),
                 "buffer_labels": torch.as_tensor([lab for _, lab in self._buffer], dtype=torch.long)}
        buf = io.BytesIO()
        torch.save(state, buf)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, seed: int = 0, n_threads: int = 1) -> "JobSensitivityClassifier":
        """A classifier restored from :meth:`to_bytes`; ValueError when ``data`` is not one."""
        import io

        import torch

        try:
            state = torch.load(io.BytesIO(data), weights_only=True)
            clf = cls(**state["params"], seed=seed, n_threads=n_threads)
            clf._net.load_state_dict(state["net"])
            clf._opt.load_state_dict(state["optimizer"])
        except Exception as exc:  # torch raises many kinds for foreign or truncated bytes
            raise ValueError(f"not a saved JobSensitivityClassifier: {exc}") from None
        clf.n_trainings = int(state["n_trainings"])
        clf._since_train = int(state["since_train"])
        codes = state["buffer_codes"].numpy().astype(np.uint8)
        clf._buffer.extend(zip(codes, state["buffer_labels"].tolist()))
        return clf

    def predict_many(self, scripts: Sequence[str]) -> np.ndarray:
        """Probability that each job is IO-sensitive (0.5 before any training)."""
        import torch

        if not self.trained:
            return np.full(len(scripts), 0.5)
        self._net.eval()
        with torch.no_grad():
            logits = self._net(torch.as_tensor(scripts_to_codes(scripts)))
            return torch.softmax(logits, 1)[:, 1].numpy().astype(float)

    def predict_one(self, script: str) -> float:
        """Probability that the job is IO-sensitive."""
        return float(self.predict_many([script])[0])
