"""Shared state handed to every tab's ``build(services)``.

Kept deliberately small: the bundled tokenizer, the longest sequence the app accepts, the
training worker (one per app; created on first use when not given), the model registry
(model keys -> loaded models) every probing tab reads its model from, and the forward cache
(``explorer/forward_cache.py``: a tab's model forward kept per input, so a layer change runs no model).
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from engine.checkpoints import hub
from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR
from engine.model.loaded_model import LoadedModel
from explorer.models.keys import KeyKind
from explorer.models.registry import ModelRegistry, UnknownModelError
from explorer.models.settings import inference_device
from engine.text.tokenizer import WordPieceTokenizer
from explorer.serving.access import AccessPolicy
from explorer.forward_cache import cache_from_env
from engine.probes.forward_cache import ForwardCache

if TYPE_CHECKING:
    from engine.training.worker.training_worker import TrainingWorker

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TOKENIZER_DIR = REPO_ROOT / "assets" / "tokenizer"
RUNS_DIR_ENV = "EXPLORER_RUNS_DIR"
DEFAULT_RUNS_DIR = "runs"
DEFAULT_MODEL_ENV = "EXPLORER_DEFAULT_MODEL"  # a model folder or hub id served as "default" instead of the bundled one
MODEL_DIRS_ENV = "EXPLORER_MODEL_DIRS"     # os.pathsep-separated folders local models may be loaded from
DEFAULT_MODEL_DIRS = ("models",)


def runs_dir_from_env() -> Path:
    """Where training runs go: ``$EXPLORER_RUNS_DIR``, default ``runs``."""
    return Path(os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


def default_model_dir_from_env() -> Path:
    """The folder served as the ``default`` model: ``$EXPLORER_DEFAULT_MODEL`` or ``assets/default-model``."""
    raw = os.environ.get(DEFAULT_MODEL_ENV, "").strip()
    return Path(raw).expanduser() if raw else DEFAULT_MODEL_DIR


def default_hub_from_env() -> str | None:
    """``$EXPLORER_DEFAULT_MODEL`` when it is a hub id (``owner/name``) and not an existing folder, else None."""
    raw = os.environ.get(DEFAULT_MODEL_ENV, "").strip()
    if not raw or Path(raw).expanduser().exists() or raw.startswith(("/", ".", "~")) or not hub.is_hub_id(raw):
        return None
    return raw


def make_registry(runs_root: Path, worker: TrainingWorker | None) -> ModelRegistry:
    """The registry the environment describes (runs, allowed model folders, the default model)."""
    default_hub = default_hub_from_env()
    return ModelRegistry(runs_root=runs_root, worker=worker, allowed_dirs=model_dirs_from_env(),
                         default_dir=None if default_hub else default_model_dir_from_env(), default_hub=default_hub,
                         device=inference_device())


def model_dirs_from_env() -> tuple[Path, ...]:
    """Folders local models may be loaded from: ``$EXPLORER_MODEL_DIRS`` (os.pathsep-separated),
    default ``models``; the runs folder is always allowed too."""
    raw = os.environ.get(MODEL_DIRS_ENV)
    names = [p for p in raw.split(os.pathsep) if p.strip()] if raw else list(DEFAULT_MODEL_DIRS)
    return tuple(Path(p).expanduser() for p in names)


class BackgroundTrainer(Protocol):
    """Something besides the training worker that trains in the background (the Experiments tab's runner)."""

    def busy_message(self) -> str | None:
        """The sentence that refuses a training run while it trains (None when it does not)."""
        ...


@dataclass
class Services:
    """Everything the tabs share. One instance per app."""

    tokenizer: WordPieceTokenizer
    max_length: int = 512  # upper bound for every sequence-length control in the UI
    worker: TrainingWorker | None = None  # the training worker; see get_worker()
    models: ModelRegistry | None = None  # model keys -> loaded models; see model()
    access: AccessPolicy = field(default_factory=AccessPolicy.from_env)  # public/private mode, read once
    # one kept forward per (model, input) and visitor, bounded in bytes (EXPLORER_FORWARD_CACHE_MB)
    forward_cache: ForwardCache = field(default_factory=cache_from_env, repr=False, compare=False)
    experiments: BackgroundTrainer | None = None  # the Experiments tab's runner (explorer.experiments.background)
    _worker_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def get_worker(self) -> TrainingWorker:
        """The app's training worker, created on first use (runs under ``runs_dir_from_env()``)."""
        with self._worker_lock:
            if self.worker is None:
                from engine.training.worker.training_worker import TrainingWorker

                self.worker = TrainingWorker(runs_root=runs_dir_from_env())
            return self.worker

    def experiment_busy(self) -> str | None:
        """The sentence that refuses a training run while an experiment trains (None when none does)."""
        return self.experiments.busy_message() if self.experiments is not None else None

    def registry(self) -> ModelRegistry:
        """The model registry (made on first use over the worker's runs when not given)."""
        with self._worker_lock:
            if self.models is None:
                self.models = make_registry(runs_dir_from_env(), self.worker)
            return self.models

    def model(self, key: str | None) -> LoadedModel:
        """The model a probing tab was asked for (``default`` when none is chosen). The key's text is read
        here, once (``ModelRegistry.resolve``); the registry carries the ``ModelKey`` from there.

        In public mode a local folder is served only once the admin loaded it, and only by the key the picker
        lists (``local:<allowed folder's name>/<inside>``): a server path names nothing for anyone else, with
        the same answer whether or not something is there (no oracle for the server's disk). A key that names
        nothing available gets a ValueError that lists the keys available now.
        """
        registry = self.registry()
        try:
            resolved = registry.resolve(key or "default")
            if resolved.kind is KeyKind.LOCAL and not self.access.is_admin(None) and not (
                    registry.listed(resolved) and registry.canonical(resolved) == resolved):
                raise UnknownModelError("On this public instance only the admin can load models from local "
                                        "folders; choose a model from the list.")
            return registry.get(resolved)
        except UnknownModelError as exc:
            raise UnknownModelError(registry.unknown_key_message(exc)) from None

    @contextlib.contextmanager
    def probing(self) -> Iterator[None]:
        """Hold while running a model for a user: a training run waits between its steps."""
        if self.worker is None:
            yield
            return
        with self.worker.priority():
            yield


def default_services(tokenizer_dir: str | Path = DEFAULT_TOKENIZER_DIR, max_length: int = 512,
                     runs_root: str | Path | None = None) -> Services:
    """Load the bundled tokenizer (``assets/tokenizer``, bert-base-uncased vocab) and make
    the training worker (runs under ``runs_root``, default ``$EXPLORER_RUNS_DIR`` or ``runs``;
    nothing is written until a run starts)."""
    from engine.training.worker.training_worker import TrainingWorker

    root = Path(runs_root) if runs_root is not None else runs_dir_from_env()
    worker = TrainingWorker(runs_root=root)
    models = make_registry(root, worker)
    return Services(tokenizer=WordPieceTokenizer.from_file(tokenizer_dir), max_length=max_length, worker=worker,
                    models=models)
