"""Shared state handed to every tab's ``build(services)``.

Kept deliberately small: the loaded tokenizer, the longest sequence the app accepts and
the training worker (one per app; created on first use when not given).
The model registry joins here later.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.tokenizer import WordPieceTokenizer

if TYPE_CHECKING:
    from engine.worker import TrainingWorker

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TOKENIZER_DIR = REPO_ROOT / "assets" / "tokenizer"
RUNS_DIR_ENV = "EXPLORER_RUNS_DIR"
DEFAULT_RUNS_DIR = "runs"


def runs_dir_from_env() -> Path:
    """Where training runs go: ``$EXPLORER_RUNS_DIR``, default ``runs``."""
    return Path(os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


@dataclass
class Services:
    """Everything the tabs share. One instance per app."""

    tokenizer: WordPieceTokenizer
    max_length: int = 512  # upper bound for every sequence-length control in the UI
    worker: TrainingWorker | None = None  # the training worker; see get_worker()
    _worker_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def get_worker(self) -> TrainingWorker:
        """The app's training worker, created on first use (runs under ``runs_dir_from_env()``)."""
        with self._worker_lock:
            if self.worker is None:
                from engine.worker import TrainingWorker

                self.worker = TrainingWorker(runs_root=runs_dir_from_env())
            return self.worker


def default_services(tokenizer_dir: str | Path = DEFAULT_TOKENIZER_DIR, max_length: int = 512,
                     runs_root: str | Path | None = None) -> Services:
    """Load the bundled tokenizer (``assets/tokenizer``, bert-base-uncased vocab) and make
    the training worker (runs under ``runs_root``, default ``$EXPLORER_RUNS_DIR`` or ``runs``;
    nothing is written until a run starts)."""
    from engine.worker import TrainingWorker

    worker = TrainingWorker(runs_root=runs_root if runs_root is not None else runs_dir_from_env())
    return Services(tokenizer=WordPieceTokenizer.from_file(tokenizer_dir), max_length=max_length, worker=worker)
