"""Loading and saving BERT checkpoints in the Hugging Face layout.

``load(source)`` accepts the bundled default, a directory (ours or any HF BERT), or a
hub id. ``save(...)`` writes ``config.json`` + ``model.safetensors`` + tokenizer files
atomically (temporary directory, fsync, rename), loadable by ``transformers``.
Untrusted weights never go through pickle: safetensors, or ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import errno
import json
import os
import pickle
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from engine.checkpoints import hub
from engine.model.config import BertConfig
from engine.model.head_specs import HEADS
from engine.model.heads import BertWithHeads
from engine.checkpoints.key_mapping import (
    architectures_for, detect_heads, export_state, hf_classes, hf_key, normalise_keys,
)
from engine.text.tokenizer import WordPieceTokenizer

ASSETS = Path(__file__).resolve().parents[2] / "assets"
DEFAULT_MODEL_DIR = ASSETS / "default-model"
# Hidden work names next to a target ``name``: ``.name.tmp-PID-xxxx`` (being assembled),
# ``.name.old-PID`` (the replaced version, during a swap), ``.name.del-PID`` (being deleted).
_WORK_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old|del)-(?P<pid>\d+)(?:-.*)?$")


class CheckpointWriteError(OSError):
    """A model or checkpoint directory could not be written (disk full, read-only folder, no
    permission); whatever was at the target name before is unchanged. ``str()`` is a readable
    sentence; ``errno`` is the underlying one."""

    def __init__(self, directory: Path, cause: OSError) -> None:
        super().__init__(cause.errno, f"could not write {directory}: {describe_os_error(cause)}; "
                                      f"nothing at {directory.name} was changed")
        self.directory = directory

    def __str__(self) -> str:
        return str(self.strerror)


@dataclass
class LoadedModel:
    """A model ready to use: weights, tokenizer, config and what it can do."""

    model: BertWithHeads
    tokenizer: WordPieceTokenizer | None
    config: BertConfig
    source: str
    path: Path | None = None
    ignored_keys: list[str] = field(default_factory=list)

    @property
    def heads(self) -> tuple[str, ...]:
        return self.model.heads

    @property
    def missing_heads(self) -> tuple[str, ...]:
        return tuple(h for h in HEADS if h not in self.model.heads)

    def require_head(self, head: str) -> None:
        """Raise a readable ``ValueError`` ("this model has no QA head") if ``head`` is absent."""
        if head not in self.model.heads:
            raise ValueError(f"this model has no {HEADS[head].noun} head ({self.source}); "
                             f"it has: {', '.join(HEADS[h].noun for h in self.heads) or 'no heads'}")

    def require_tokenizer(self, then: str = "so it cannot read text") -> WordPieceTokenizer:
        """The tokenizer, or a ``ValueError`` "this model (<source>) has no tokenizer files (vocab.txt or
        tokenizer.json), <then>": ``then`` says what cannot be done without one."""
        if self.tokenizer is None:
            raise ValueError(f"this model ({self.source}) has no tokenizer files (vocab.txt or tokenizer.json), "
                             f"{then}")
        return self.tokenizer

    def save(self, directory: str | Path, architectures: list[str] | None = None) -> Path:
        return save(self.model, self.tokenizer, directory, architectures)


def load(source: str | Path, device: str | torch.device = "cpu",
         max_download_bytes: int = hub.DEFAULT_MAX_BYTES) -> LoadedModel:
    """Load ``"default"``, a local HF-format directory, or a hub id (``owner/name``; at most
    ``max_download_bytes`` of weights are fetched)."""
    text = str(source).strip()
    if not text:
        raise ValueError("no model given: name 'default', a local directory or a hub id")
    if text == "default":
        if not (DEFAULT_MODEL_DIR / "config.json").exists():
            raise FileNotFoundError(f"the bundled default model is missing at {DEFAULT_MODEL_DIR}")
        return load_directory(DEFAULT_MODEL_DIR, device, source="default")
    path = Path(text).expanduser()
    if path.exists():
        return load_directory(path, device)
    if text.startswith(("/", "./", "../", "~")) or os.sep in text.replace("/", "") or text.count("/") > 1:
        raise FileNotFoundError(f"no model directory at {text}")
    if hub.is_hub_id(text):
        return load_directory(hub.download(text, max_bytes=max_download_bytes), device, source=f"hub:{text}")
    raise FileNotFoundError(f"{text!r} is neither a local model directory nor a hub id ('owner/name')")


def load_directory(directory: str | Path, device: str | torch.device = "cpu", source: str | None = None) -> LoadedModel:
    """Load an HF-format BERT directory; every check happens before a model is returned."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no model directory at {directory}")
    config = BertConfig.load(directory)
    try:
        state, ignored = normalise_keys(read_weights(directory), config.architectures)
    except ValueError as exc:
        raise ValueError(f"{directory}: {exc}") from None
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    heads, has_pooler = detect_heads(state)
    for spec in (HEADS[h] for h in heads if HEADS[h].labelled and f"{HEADS[h].prefix}weight" in state):
        num_labels = state[f"{spec.prefix}weight"].shape[0]
        if num_labels != config.num_labels:
            config = config.replace(id2label={i: f"LABEL_{i}" for i in range(num_labels)})
    pooled = [HEADS[h].noun for h in heads if HEADS[h].pooled]
    if pooled and not has_pooler:
        raise ValueError(f"{directory}: the checkpoint has a {' and a '.join(pooled)} head but no pooler weights")
    try:
        model = BertWithHeads(config, heads=heads, add_pooling_layer=has_pooler)
    except ValueError as exc:   # e.g. two heads stored under transformers' one `classifier` name
        raise ValueError(f"{directory}: {exc}") from None
    tied = {HEADS[h].prefix + key for h in model.heads for key in HEADS[h].tied}   # the MLM decoder's
    expected = {k for k in model.state_dict() if k not in tied}
    missing = sorted(expected - state.keys())
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        raise ValueError(f"{directory}: the weights are incomplete for a {config.num_hidden_layers}-layer BERT; "
                         f"missing {shown}")
    unexpected = sorted(state.keys() - expected)
    if unexpected:
        raise ValueError(f"{directory}: weights do not fit config.json (e.g. more layers than "
                         f"num_hidden_layers): unexpected {', '.join(unexpected[:6])}")
    for key, tensor in model.state_dict().items():
        if key in state and state[key].shape != tensor.shape:
            raise ValueError(f"{directory}: {hf_key(key)} has shape {tuple(state[key].shape)} but config.json "
                             f"implies {tuple(tensor.shape)}")
    model.load_state_dict(state, strict=False)  # the tied decoder weight comes from the embeddings
    model.to(device).eval()
    tokenizer = _load_tokenizer(directory, config)
    return LoadedModel(model, tokenizer, config, source or str(directory), directory, ignored)


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """Read the weight tensors of an HF directory: safetensors (single/sharded) or a weights-only .bin."""
    single, index, legacy = (directory / "model.safetensors", directory / "model.safetensors.index.json",
                             directory / "pytorch_model.bin")
    try:
        if single.exists():
            return load_file(str(single))
        if index.exists():
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
            state: dict[str, torch.Tensor] = {}
            for shard in shards:
                shard_path = directory / shard
                # The shard must sit in this directory; the file itself may be a symlink (the hub cache's are).
                if shard_path.parent.resolve() != directory.resolve():
                    raise ValueError(f"shard {shard!r} points outside {directory}")
                state.update(load_file(str(shard_path)))
            return state
        if legacy.exists():
            try:
                state = torch.load(legacy, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError:
                raise
            except Exception as exc:  # a damaged file fails in arbitrary ways (OSError, IndexError, KeyError, ...)
                raise ValueError(f"{legacy} is corrupt or unreadable ({type(exc).__name__}: {str(exc)[:200]})") from None
            if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
                raise ValueError(f"{legacy} does not hold a state dict of tensors")
            return state
    except (SafetensorError, json.JSONDecodeError, KeyError, RuntimeError, EOFError) as exc:
        raise ValueError(f"{directory}: the weights file is corrupt or unreadable ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None
    except Exception as exc:  # pickle.UnpicklingError and friends from weights_only=True
        if type(exc).__name__ == "UnpicklingError":
            raise ValueError(f"{directory}: pytorch_model.bin is damaged or holds more than plain tensors; refusing "
                             "to unpickle it (convert it to safetensors)") from None
        raise
    raise FileNotFoundError(f"{directory}: no model.safetensors, sharded safetensors or pytorch_model.bin")


def _load_tokenizer(directory: Path, config: BertConfig) -> WordPieceTokenizer | None:
    if not ((directory / "tokenizer.json").exists() or (directory / "vocab.txt").exists()):
        return None
    tokenizer = WordPieceTokenizer.from_file(directory)
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"{directory}: the tokenizer has {tokenizer.vocab_size} tokens but the model only "
                         f"{config.vocab_size} embeddings")
    return tokenizer


def save(model: BertWithHeads, tokenizer: WordPieceTokenizer | None, directory: str | Path,
         architectures: list[str] | None = None, extra: Callable[[Path], None] | None = None) -> Path:
    """Write an HF-format directory atomically. ``architectures`` picks the exported classes.

    By default the model's heads decide (e.g. MLM+NSP -> ``BertForPreTraining``); a model
    with several head families lists several classes, and one named class gives a file
    ``transformers`` loads with nothing missing or unexpected. Classes whose heads share
    transformers' ``classifier.*`` keys (sequence, token classification, multiple choice)
    cannot be exported together (``ValueError``). ``extra(staging_dir)`` may write more
    files (a trainer's state) before the directory is made visible.
    """
    directory = Path(directory)
    architectures = list(architectures or architectures_for(model.heads))
    state = {k: v.detach().to("cpu", torch.float32).contiguous().clone() for k, v in model.state_dict().items()}
    exported = export_state(state, architectures)
    classes = hf_classes()
    for name in architectures:
        needed, pooler = classes[name]        # the class's heads; whether its encoder has the pooler
        absent = [h for h in needed if h not in model.heads]
        if absent or (pooler and not model.has_pooler):
            raise ValueError(f"cannot export as {name}: the model lacks "
                             f"{', '.join(HEADS[h].noun for h in absent) or 'the pooler'}")
    config = model.config.replace(architectures=architectures)
    exported_heads = [HEADS[h] for name in architectures for h in classes[name][0]]
    fixed = [s.hf_num_labels for s in exported_heads if s.hf_num_labels is not None]
    if fixed and not any(s.labelled for s in exported_heads) and config.num_labels != fixed[0]:
        # transformers sizes qa_outputs by num_labels (start, end); no labelled classifier is exported here
        config = config.replace(id2label={i: f"LABEL_{i}" for i in range(fixed[0])})
    staging: Path | None = None
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        recover_interrupted_writes(directory.parent, only=directory.name)   # a crashed earlier write of it
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-{os.getpid()}-", dir=directory.parent))
        staging.chmod(0o755)  # mkdtemp makes it private; a model directory is an ordinary folder
        save_file(exported, str(staging / "model.safetensors"), metadata={"format": "pt"})
        (staging / "model.safetensors").chmod(0o644)   # safetensors creates it owner-only
        config.save(staging)
        if tokenizer is not None:
            tokenizer.save(staging)
        if extra is not None:
            extra(staging)
        _fsync_tree(staging)
        _replace_directory(staging, directory)
    except BaseException as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, CheckpointWriteError):
            raise CheckpointWriteError(directory, exc) from exc
        raise
    return directory


def describe_os_error(exc: OSError) -> str:
    """A short sentence for a failed write: disk full, read-only file system, permission denied, ..."""
    where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
    reasons = {errno.ENOSPC: "the disk is full (no space left on device)",
               errno.EDQUOT: "the disk quota is exhausted",
               errno.EROFS: "the folder is on a read-only file system",
               errno.EACCES: "permission denied: the folder is not writable",
               errno.EPERM: "the operation is not permitted in that folder"}
    if exc.errno in reasons:
        return reasons[exc.errno] + where
    return (exc.strerror or str(exc) or type(exc).__name__) + where


def recover_interrupted_writes(folder: str | Path, only: str | None = None) -> list[Path]:
    """Finish or undo what writers that died mid-save (SIGKILL, power loss) left in ``folder``.

    A staging ``.name.tmp-PID-*`` or a half-deleted ``.name.del-PID`` of a dead process is
    removed; a ``.name.old-PID`` (the previous version, swapped out) is renamed back to
    ``name`` when nothing took its place, else removed. Work names of live processes (this
    one included) are left alone, so a listing never races a writer. ``only`` limits it to
    one target name. Returns the paths removed or restored; errors are ignored.
    """
    folder = Path(folder)
    touched: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return touched
    for path in entries:
        match = _WORK_NAME.match(path.name)
        if not match or (only is not None and match["name"] != only) or _alive(int(match["pid"])):
            continue
        target = folder / match["name"]
        try:
            if match["kind"] == "old" and not target.exists():
                os.rename(path, target)            # the swap died between its two renames: undo it
            else:
                shutil.rmtree(path)
        except OSError:
            continue                               # another thread got there first, or no permission
        touched.append(path)
    return touched


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True                                # exists, owned by someone else
    return True


def _fsync_tree(directory: Path) -> None:
    """fsync every file under ``directory`` and the directories themselves (data before the rename)."""
    for path in directory.iterdir():
        if path.is_dir():
            _fsync_tree(path)
            continue
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _replace_directory(staging: Path, target: Path) -> None:
    """Swap ``staging`` in as ``target``; at every instant a complete directory sits at one of the names."""
    if target.exists():
        # A crash between the two renames leaves the old version at .name.old-PID, which
        # recover_interrupted_writes renames back; a failed second rename is undone here.
        retired = target.with_name(f".{target.name}.old-{os.getpid()}")
        shutil.rmtree(retired, ignore_errors=True)
        os.rename(target, retired)
        try:
            os.rename(staging, target)
        except BaseException:
            os.rename(retired, target)
            raise
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.rename(staging, target)
    parent_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(parent_fd)
    finally:
        os.close(parent_fd)
