"""Which models the probing tabs can use, and a small cache of the loaded ones.

Every model has a *key* (``default``, ``live``, a checkpoint, a local folder, a hub model: ``explorer.models.keys``),
a string in the picker and the API, a ``ModelKey`` here. ``resolve(source)`` turns what a user typed (a key, a
path, a hub id) into a ``ModelKey`` once; the other methods take that value (or text, which they resolve).
``ModelRegistry.get(key)`` loads (once; a few stay cached) and returns a ``LoadedModel``; every failure is a
``ValueError``/``FileNotFoundError``/``ConnectionError`` a person understands. ``choices()`` lists what the
picker offers (its entries, ``ModelChoice``, and their labels: ``explorer.models.choices``). No Gradio here.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from engine.model.families.registry import check_in_the_tabs, load_config
from engine.folder_listing import configured_folder
from engine.checkpoints import hub
from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR, load_directory
from engine.model.loaded_model import LoadedModel
from engine.checkpoints.model_fit import ModelTooLargeError, config_check
from engine.model.config import BertConfig
from engine.model.untrained import untrained_twin
from engine.training.runs.run_folder import CheckpointInfo, RunFolder, is_complete
from engine.training.runs.run_catalog import checkpoints_newest_first
from engine.training.runs.experiment_runs import locate
from explorer.models.choices import ModelChoice, checkpoint_choice
from explorer.models.local_folders import LocalFolders, is_dir as _is_dir
from explorer.models.description import family_and_size
from explorer.models.keys import DEFAULT, LIVE, UNTRAINED, KeyKind, ModelKey, usable_run_name
from explorer.runs.run_choice import RunChoice
from explorer.models.settings import max_hub_bytes, max_model_parameters

if TYPE_CHECKING:
    from engine.training.worker.training_worker import TrainingWorker

LISTED_KEYS = 12                 # an unknown-key message lists at most this many of the keys available now
logger = logging.getLogger(__name__)


class UnknownModelError(ValueError):
    """A model key that names nothing available (a typo, a deleted checkpoint, ``live`` without a run)."""


class ModelRegistry:
    """Model keys -> loaded models, with an LRU cache of ``cache_size`` models."""

    def __init__(self, runs_root: str | Path | None = None, worker: TrainingWorker | None = None,
                 allowed_dirs: tuple[str | Path, ...] = (), default_dir: str | Path | None = DEFAULT_MODEL_DIR,
                 cache_size: int = 4, default_hub: str | None = None, device: str = "cpu",
                 max_download_bytes: int | None = None, max_parameters: int | None = None) -> None:
        self.device = device                           # where loaded models run (``inference_device()``)
        self.max_download_bytes = max_hub_bytes() if max_download_bytes is None else max_download_bytes
        self.max_parameters = max_model_parameters() if max_parameters is None else max_parameters
        self.runs_root = Path(runs_root) if runs_root is not None else None
        self.worker = worker
        self.allowed_dirs = tuple(configured_folder(d) for d in allowed_dirs)   # a loop offers nothing, never raises
        self.default_dir = Path(default_dir) if default_dir is not None else None
        if default_hub is not None and not hub.is_hub_id(default_hub):
            raise ValueError(f"{default_hub!r} is not a hub model id; expected the form 'owner/name'")
        self.default_hub = default_hub                 # served as ``default`` instead of default_dir when set
        self.cache_size = max(1, cache_size)
        self._cache: OrderedDict[ModelKey, LoadedModel] = OrderedDict()
        self._pinned: dict[ModelKey, LoadedModel] = {}
        self._extra: dict[ModelKey, ModelChoice] = {}      # local/hub models loaded this session
        self._local = LocalFolders(self.allowed_dirs, self.runs_root)   # local models' short keys -> folders
        self._lock = threading.Lock()
        self._key_locks: dict[ModelKey, threading.Lock] = {}
        self._warned: set[str] = set()                # run names left out of the list (already logged)

    # ------------------------------------------------------------------ listing
    def has_default(self) -> bool:
        """Whether a ``default`` model is configured (pinned, a hub id, or a folder with a config.json)."""
        return (DEFAULT in self._pinned or self.default_hub is not None
                or (self.default_dir is not None and (self.default_dir / "config.json").is_file()))

    def listed(self, key: str | ModelKey) -> bool:
        """Whether ``key`` is a local/hub model already loaded this session (it is in the picker); a folder's
        path names the same model as its key. False, never an error, for anything else."""
        try:
            key = self.canonical(key)
        except (ValueError, OSError):
            return False
        with self._lock:
            return key in self._extra

    def canonical(self, key: str | ModelKey) -> ModelKey:
        """The key clients are sent for ``key``: a local folder's ``local:<root>/<inside>`` (its server path
        stays here), any other key unchanged. Errors as ``get`` for a folder that is not allowed."""
        key = self.resolve(key)
        return self._local.short(key) if key.kind is KeyKind.LOCAL else key

    def checkpoint_infos(self) -> list[CheckpointInfo]:
        """Complete checkpoints of every run, newest first; a run whose folder name cannot be a key (control
        characters) is left out with a logged warning."""
        if self.worker is not None:
            found = self.worker.checkpoints()
        elif self.runs_root is None:
            return []
        else:
            found = checkpoints_newest_first(self.runs_root, experiments=True)
        usable = [c for c in found if usable_run_name(c.run.name) and c.loadable]   # damaged weights: not offered
        unusable = {c.run.name for c in found} - {c.run.name for c in usable} - self._warned
        for name in sorted(unusable):                           # said once per run, not at every listing
            logger.warning("The run %r is left out of the model list: its folder's name holds control "
                           "characters; rename the folder to list it", name[:80])
        self._warned |= unusable
        return usable

    def choices(self) -> list[ModelChoice]:
        """Default, the live run, every run's checkpoints (newest first), loaded local/hub models, then the
        default model's untrained twin."""
        found: list[ModelChoice] = []
        if self.has_default():
            label = f"Default model (hub: {self.default_hub})" if self.default_hub else "Bundled default model"
            found.append(ModelChoice(DEFAULT.text, label, "default"))
        found += [ModelChoice(k.text, f"{v.source}", "default") for k, v in self._pinned.items() if k != DEFAULT]
        if self.worker is not None and self.worker.trainer is not None:
            found.append(ModelChoice(LIVE.text, "Live training run (current weights)", "live"))
        found += [checkpoint_choice(c) for c in self.checkpoint_infos()]
        with self._lock:
            found += list(self._extra.values())
        if self.has_default():
            found.append(ModelChoice(UNTRAINED.text, "Untrained twin of the default model (random weights)", "default"))
        return found

    def available_keys(self) -> list[str]:
        """Every key the picker lists now, in its order."""
        return [c.key for c in self.choices()]

    def unknown_key_message(self, error: UnknownModelError) -> str:
        """``error``'s message followed by the keys that work now (at most ``LISTED_KEYS`` of them)."""
        keys = self.available_keys()
        if not keys:
            return f"{error} No model is available yet: start a training run or load a model folder."
        shown = ", ".join(keys[:LISTED_KEYS]) + (f" and {len(keys) - LISTED_KEYS} more" if len(keys) > LISTED_KEYS
                                                 else "")
        return f"{error} Models available now: {shown}."

    def runs(self) -> list[RunChoice]:
        """Every run with complete checkpoints, the one with the newest checkpoint first."""
        grouped: dict[str, list[CheckpointInfo]] = {}
        for info in self.checkpoint_infos():                     # newest first
            grouped.setdefault(info.run.name, []).append(info)
        return [RunChoice(name, len(infos), min(i.step for i in infos), max(i.step for i in infos),
                          infos[0].run.title) for name, infos in grouped.items()]

    def run_checkpoints(self, key: str | ModelKey | None = None, run: str | None = None) -> list[ModelChoice]:
        """The checkpoints of one run, oldest first: ``run`` when given, else the run of ``key`` if it is
        a checkpoint, else the run of the newest checkpoint. Empty when there are no checkpoints at all;
        ``UnknownModelError`` when the run asked for (by name or by a checkpoint key) has none."""
        infos = self.checkpoint_infos()
        name = (run or "").strip()
        if not name and key:
            name = (key if isinstance(key, ModelKey) else ModelKey.parse(key)).run
        if not name:
            if not infos:
                return []
            name = infos[0].run.name
        own = [c for c in infos if c.run.name == name]
        if not own:
            listed = ", ".join(r.label for r in self.runs()[:LISTED_KEYS]) or "none yet"
            raise UnknownModelError(f"The run {name[:80]!r} has no checkpoints. Runs with checkpoints now: {listed}.")
        return [checkpoint_choice(c) for c in sorted(own, key=lambda c: c.step)]

    def peek_config(self, key: str | ModelKey | None) -> BertConfig | None:
        """``key``'s config without loading weights (for building the UI fast): a loaded model's, or the
        default folder's ``config.json``; None where only a load would tell."""
        try:
            key = self.resolve(key or "")
        except ValueError:
            return None
        with self._lock:
            loaded = self._pinned.get(key) or self._cache.get(key)
        if loaded is not None:
            return loaded.config
        if key == DEFAULT and self.default_hub is None and self.has_default():
            try:
                return load_config(self.default_dir)
            except (OSError, ValueError):
                return None
        return None

    # ------------------------------------------------------------------ loading
    def pin(self, key: str | ModelKey, loaded: LoadedModel) -> None:
        """Serve ``loaded`` under ``key`` without loading it (tests, or a model built in memory)."""
        with self._lock:
            self._pinned[key if isinstance(key, ModelKey) else ModelKey.read(key)] = loaded

    def resolve(self, source: str | ModelKey) -> ModelKey:
        """The key of what a user typed: a key, ``default``, a local folder or an ``owner/name`` hub id (a
        ``ModelKey`` comes back as it is, unless it is a plain name that no pinned model has)."""
        key = source if isinstance(source, ModelKey) else ModelKey.read(source)
        if key.kind is not KeyKind.NAME or key in self._pinned:
            return key
        text = key.reference
        if "://" in text:
            raise ValueError("Give a hub model as 'owner/name', not a URL.")
        if text.startswith(("/", ".", "~")) or "\\" in text or text.count("/") > 1 or self._local.holds(text):
            return ModelKey.local(text)
        if hub.is_hub_id(text):
            return ModelKey.hub(text)
        raise UnknownModelError(f"{text!r} is neither a model key, a model folder nor a hub id of the form "
                                "'owner/name'.")

    def get(self, key: str | ModelKey) -> LoadedModel:
        """The model for ``key``, loading it on first use (``live`` is always the current snapshot)."""
        key = self.canonical(key)
        if key in self._pinned:
            return self._pinned[key]
        if key == LIVE:
            return self._live()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:                                       # one load per key, others wait for it
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
            loaded = untrained_twin(self.get(DEFAULT)) if key == UNTRAINED else self._load(key)
            with self._lock:
                self._cache[key] = loaded
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
                if key.kind in (KeyKind.LOCAL, KeyKind.HUB):                  # local: its key, not its path
                    label = f"{key.kind}: {key.reference} ({family_and_size(loaded)})"     # "RoBERTa, 125M"
                    self._extra[key] = ModelChoice(key.text, label, key.kind.value)
            return loaded

    def folder(self, key: str | ModelKey) -> Path:
        """The folder holding ``key``'s files, as ``--init-from`` takes it (a training job starts from it):
        the default model's, a checkpoint's, an allowed local folder, a hub model's download. ValueError for
        ``live`` (its weights change at every step) and for a model held in memory only."""
        key = self.resolve(key)
        kind, rest = key.kind, key.reference
        if key in self._pinned or key == UNTRAINED:
            raise ValueError(f"The model {key.text!r} is held in memory only; pick a checkpoint or a saved model.")
        if key == LIVE:
            raise ValueError("The live model changes at every step; pick one of its run's checkpoints instead.")
        if key == DEFAULT:
            if self.default_hub is not None:
                return self._download(self.default_hub)
            if not self.has_default():
                raise FileNotFoundError("The bundled default model is missing from this install "
                                        f"({self.default_dir}); load a checkpoint or a local model instead.")
            return self.default_dir
        if kind is KeyKind.CHECKPOINT:
            return self._checkpoint_dir(key)
        if kind is KeyKind.LOCAL:
            return self._local.folder(key)
        if kind is KeyKind.HUB:
            if not hub.is_hub_id(rest):
                raise ValueError(f"{rest!r} is not a hub model id; expected the form 'owner/name'.")
            if hub.hub_offline():
                raise ConnectionError(f"The hub is switched off here (offline mode), so {rest} cannot be "
                                      "downloaded. Use the bundled model, a checkpoint or a local folder.")
            return self._download(rest)
        raise UnknownModelError(f"Unknown model {key.text!r}: choose one from the list.")

    def _load(self, key: ModelKey) -> LoadedModel:
        """Load the (canonical) ``key`` from its folder."""
        source = (f"default (hub {self.default_hub})" if self.default_hub else "default") if key == DEFAULT \
            else f"{key.kind} {key.reference}"
        try:
            loaded = load_directory(self.folder(key), self.device, source=source, max_parameters=self.max_parameters)
        except ModelTooLargeError as exc:
            raise ModelTooLargeError(f"{exc} (the limit is EXPLORER_MAX_MODEL_PARAMS)") from None
        except (PermissionError, IsADirectoryError, NotADirectoryError) as exc:   # unreadable: say so, no server path
            what = (exc.strerror or type(exc).__name__).lower() + (f": {Path(exc.filename).name}" if exc.filename else "")
            raise ValueError(f"The model {key} cannot be read ({what}).") from None
        check_in_the_tabs(loaded.config, str(key))      # a family the tabs do not read yet: one sentence
        return loaded

    def _download(self, repo_id: str) -> Path:
        """``hub.download`` under the app's cap; the message names the setting that raises it."""
        try:
            return hub.download(repo_id, max_bytes=self.max_download_bytes,
                                check_config=config_check(self.max_parameters, ModelKey.hub(repo_id).text))
        except hub.DownloadTooLargeError as exc:
            raise hub.DownloadTooLargeError(f"{exc} (the limit is EXPLORER_MAX_HUB_MB)") from None

    def _checkpoint_dir(self, key: ModelKey) -> Path:
        """A checkpoint key's folder, in the worker's runs (the live run's first) or the runs folder."""
        if not key.is_checkpoint_name:
            raise UnknownModelError(f"{key.reference[:200]!r} is not a checkpoint name; choose one from the list.")
        roots = [self.runs_root] if self.runs_root is not None else []
        if self.worker is not None:
            roots.insert(0, self.worker.runs_root)
            live_dir = self.worker.status().run_dir
            if live_dir:
                roots.insert(0, Path(live_dir).parent)
        for root in roots:
            run = locate(root, key.run)                  # a direct run, or an experiment's (experiments:...)
            path = run.checkpoints_dir / key.step_dir if run is not None else None
            if path is not None and _is_dir(path) and is_complete(path):
                return path
        raise UnknownModelError(f"Checkpoint {key.reference} does not exist (or no longer: runs keep only their newest "
                                "checkpoints); pick another one.")

    def _live(self) -> LoadedModel:
        if self.worker is None or self.worker.trainer is None:
            raise UnknownModelError("There is no training run right now, so there is no live model; start one in "
                                    "the Training tab, or pick a checkpoint.")
        loaded = self.worker.snapshot()
        if loaded is None:
            raise UnknownModelError("The training run has no model yet; wait for it to start.")
        return loaded

