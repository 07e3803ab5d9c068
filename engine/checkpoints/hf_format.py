"""Loading and saving BERT checkpoints in the Hugging Face layout.

``load(source)`` accepts the bundled default, a directory (ours or any HF BERT), or a
hub id. ``save(...)`` writes ``config.json`` + ``model.safetensors`` + tokenizer files
atomically (temporary directory, fsync, rename), loadable by ``transformers``; a write the disk refuses (full, read-only)
is a ``DiskFault`` (``engine.disk_faults``) and leaves whatever was at the target name unchanged.
Untrusted weights never go through pickle: safetensors, or ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import save_file

from engine.checkpoints import hub
from engine.disk_faults import disk_fault, make_folder
from engine.checkpoints.model_fit import (
    DEFAULT_MAX_PARAMETERS, build_on_meta, check_config_size, check_fits, config_check, fill,
)
from engine.checkpoints.weight_files import each_tensor, read_weights
from engine.model.config import BertConfig
from engine.model.families.registry import load_config, save_config, state_to_ours, state_to_theirs
from engine.model.head_specs import HEADS
from engine.model.heads import BertWithHeads, head_specs_for
from engine.model.loaded_model import LoadedModel
from engine.checkpoints.key_mapping import (
    architectures_for, classes_that_load, detect_heads, export_state, hf_classes, normalise_keys,
)
from engine.text.tokenizer import WordPieceTokenizer

ASSETS = Path(__file__).resolve().parents[2] / "assets"
DEFAULT_MODEL_DIR = ASSETS / "default-model"
# Hidden work names next to a target ``name``: ``.name.tmp-PID-hHOST-xxxx`` (being assembled),
# ``.name.old-PID-hHOST`` (the replaced version, during a swap), ``.name.del-PID-hHOST`` (being deleted).
# HOST is a hash of the writer's host name: on a folder shared by several machines (a cluster's runs
# folder) only the host that wrote a work name judges whether its writer is still alive.
_WORK_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old|del)-(?P<pid>\d+)(?:-h(?P<host>[0-9a-f]{8}))?(?:-.*)?$")
THIS_HOST = f"{zlib.crc32(socket.gethostname().encode()):08x}"


def work_tag() -> str:
    """``PID-hHOST``: what a work name says about its writer (``recover_interrupted_writes`` reads it)."""
    return f"{os.getpid()}-h{THIS_HOST}"


def load(source: str | Path, device: str | torch.device = "cpu",
         max_download_bytes: int = hub.DEFAULT_MAX_BYTES,
         max_parameters: int = DEFAULT_MAX_PARAMETERS) -> LoadedModel:
    """Load ``"default"``, a local HF-format directory, or a hub id (``owner/name``; at most
    ``max_download_bytes`` of weights are fetched). A model over ``max_parameters`` parameters is refused
    (``ModelTooLargeError``) before anything is allocated."""
    text = str(source).strip()
    if not text:
        raise ValueError("no model given: name 'default', a local directory or a hub id")
    if text == "default":
        if not (DEFAULT_MODEL_DIR / "config.json").exists():
            raise FileNotFoundError(f"the bundled default model is missing at {DEFAULT_MODEL_DIR}")
        return load_directory(DEFAULT_MODEL_DIR, device, source="default", max_parameters=max_parameters)
    path = Path(text).expanduser()
    if path.exists():
        return load_directory(path, device, max_parameters=max_parameters)
    if text.startswith(("/", "./", "../", "~")) or os.sep in text.replace("/", "") or text.count("/") > 1:
        raise FileNotFoundError(f"no model directory at {text}")
    if hub.is_hub_id(text):
        return load_directory(hub.download(text, max_bytes=max_download_bytes,
                                           check_config=config_check(max_parameters, f"hub:{text}")),
                              device, source=f"hub:{text}", max_parameters=max_parameters)
    raise FileNotFoundError(f"{text!r} is neither a local model directory nor a hub id ('owner/name')")


def load_directory(directory: str | Path, device: str | torch.device = "cpu", source: str | None = None,
                   max_parameters: int = DEFAULT_MAX_PARAMETERS) -> LoadedModel:
    """Load an HF-format BERT directory; every check happens before a model is returned, and before memory is
    spent on it: config.json's size against ``max_parameters``, then the weight files' names and shapes
    (their headers) against the model config.json implies, built on the ``meta`` device; only then are the
    weights read and put in place (``model_fit``)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no model directory at {directory}")
    config = load_config(directory)                     # any family's config.json (engine/model/families)
    specs = head_specs_for(config)                      # the heads its family reads
    check_config_size(config, max_parameters, str(directory))
    try:
        headers = read_weights(directory, meta=True)
        ours, dropped = state_to_ours(headers, config)                   # the family's names -> ours
        shapes, ignored = normalise_keys(ours, config.architectures, specs)
    except ValueError as exc:
        raise ValueError(_naming(directory, exc)) from None
    ignored = dropped + ignored
    heads, has_pooler = detect_heads(shapes, specs)
    for spec in (specs[h] for h in heads if specs[h].labelled and f"{specs[h].prefix}weight" in shapes):
        num_labels = shapes[f"{spec.prefix}weight"].shape[0]
        if num_labels != config.num_labels:
            config = config.replace(id2label={i: f"LABEL_{i}" for i in range(num_labels)})
    pooled = [specs[h].noun for h in heads if specs[h].pooled]
    if pooled and not has_pooler:
        raise ValueError(f"{directory}: the checkpoint has a {' and a '.join(pooled)} head but no pooler weights")
    try:
        model = build_on_meta(config, heads, has_pooler)
    except ValueError as exc:   # e.g. two heads stored under transformers' one `classifier` name
        raise ValueError(_naming(directory, exc)) from None
    check_fits(model, shapes, max_parameters, str(directory))
    tokenizer = _load_tokenizer(directory, config)
    file_key = {id(tensor): key for key, tensor in headers.items()}      # the renaming moved the headers' tensors
    names = {file_key[id(tensor)]: key for key, tensor in shapes.items()}
    fill(model, each_tensor(directory, names), shapes, str(directory))   # tensor by tensor, into fp32
    model.to(device).eval()
    return LoadedModel(model, tokenizer, config, source or str(directory), directory, ignored)


def _naming(directory: Path, exc: Exception) -> str:
    """The message of ``exc`` naming ``directory`` once: prefixed only when it does not already name it."""
    message = str(exc)
    return message if str(directory) in message else f"{directory}: {message}"


def _load_tokenizer(directory: Path, config: BertConfig) -> WordPieceTokenizer | None:
    if not ((directory / "tokenizer.json").exists() or (directory / "vocab.txt").exists()):
        return None
    tokenizer = WordPieceTokenizer.from_file(directory)
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"{directory}: the tokenizer has {tokenizer.vocab_size} tokens but the model only "
                         f"{config.vocab_size} embeddings")
    return tokenizer


def save(model: BertWithHeads, tokenizer: WordPieceTokenizer | None, directory: str | Path,
         architectures: list[str] | None = None, extra: Callable[[Path], None] | None = None,
         dtype: torch.dtype = torch.float32) -> Path:
    """Write an HF-format directory atomically. ``architectures`` picks the exported classes.

    By default the model's heads decide (e.g. MLM+NSP -> ``BertForPreTraining``); a model
    with several head families lists several classes, and one named class gives a file
    ``transformers`` loads with nothing missing or unexpected. Classes whose heads share
    transformers' ``classifier.*`` keys (sequence, token classification, multiple choice)
    cannot be exported together (``ValueError``). ``config.json`` names only classes that
    load from it: a head transformers sizes by ``num_labels`` (QA) beside a classifier of
    another label count keeps its weights in the file but not its class in ``architectures``
    (named explicitly, such a pair is a ``ValueError``). ``extra(staging_dir)`` may write more
    files (a trainer's state) before the directory is made visible. ``dtype`` is the dtype the floating tensors are
    stored in (integer ones keep theirs; a tensor float16 cannot hold, |x| > 65504, stays float32); narrower than
    float32, ``config.json`` says ``"dtype": "float32"`` as the bundled model's does, so ``transformers`` (its default
    ``dtype="auto"`` reads it) computes in float32 as this app's loader does.
    """
    directory = Path(directory)
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"weights are saved in float32, float16 or bfloat16, not {dtype}")
    explicit = bool(architectures)
    specs = model.specs                                 # the heads its family reads
    architectures = list(architectures or architectures_for(model.heads, specs))
    state = {k: _stored(v.detach().to("cpu"), dtype) for k, v in model.state_dict().items()}
    exported = state_to_theirs(export_state(state, architectures, specs), model.config,
                               bare=architectures == ["BertModel"])
    classes = hf_classes(specs)
    for name in architectures:
        needed, pooler = classes[name]        # the class's heads; whether its encoder has the pooler
        absent = [h for h in needed if h not in model.heads]
        if absent or (pooler and not model.has_pooler):
            raise ValueError(f"cannot export as {name}: the model lacks "
                             f"{', '.join(specs[h].noun for h in absent) or 'the pooler'}")
    named, unfit, num_labels = classes_that_load(architectures, model.config.num_labels, specs)
    if unfit and explicit:
        raise ValueError(f"cannot export as {unfit[0]} beside a {num_labels}-label classifier: transformers sizes "
                         f"both heads by num_labels, so one config.json cannot serve them both")
    config = model.config.replace(architectures=named)
    if num_labels != config.num_labels:
        # transformers sizes qa_outputs by num_labels (start, end); no labelled classifier is exported here
        config = config.replace(id2label={i: f"LABEL_{i}" for i in range(num_labels)})
    staging: Path | None = None
    try:
        make_folder(directory.parent)
        recover_interrupted_writes(directory.parent, only=directory.name)   # a crashed earlier write of it
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-{work_tag()}-", dir=directory.parent))
        staging.chmod(0o755)  # mkdtemp makes it private; a model directory is an ordinary folder
        save_file(exported, str(staging / "model.safetensors"), metadata={"format": "pt"})
        (staging / "model.safetensors").chmod(0o644)   # safetensors creates it owner-only
        save_config(config, staging)                    # the family's config.json
        if dtype != torch.float32:
            _compute_in_float32(staging / "config.json")
        if tokenizer is not None:
            tokenizer.save(staging)
        if extra is not None:
            extra(staging)
        _fsync_tree(staging)
        _replace_directory(staging, directory)
    except BaseException as exc:
        fault = disk_fault(exc, directory.parent, f"writing the model folder {directory.name}")  # before the rmtree:
        if staging is not None:                            # its partial files are what shows a full disk
            shutil.rmtree(staging, ignore_errors=True)
        if fault is None or fault is exc:
            raise
        raise fault from exc
    return directory


def _stored(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A contiguous copy of ``tensor`` as saved: floating ones in ``dtype`` (float32 when ``dtype`` cannot hold its
    values: float16 past ±65504), others as they are."""
    if not tensor.is_floating_point():
        return tensor.contiguous().clone()
    stored = tensor.to(dtype)
    if dtype != torch.float32 and bool((stored.isinf() & tensor.isfinite()).any()):
        stored = tensor.to(torch.float32)                # overflowed: keep this one exact
    return stored.contiguous().clone() if stored.data_ptr() == tensor.data_ptr() else stored.contiguous()


def _compute_in_float32(config_path: Path) -> None:
    """Add ``"dtype": "float32"`` to a ``config.json`` whose weights are stored narrower (transformers 5's field;
    its ``from_pretrained`` reads it with its default ``dtype="auto"``, else it would compute in the stored dtype)."""
    data = json.loads(config_path.read_text(encoding="utf-8"))
    data["dtype"] = "float32"
    config_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def recover_interrupted_writes(folder: str | Path, only: str | None = None) -> list[Path]:
    """Finish or undo what writers that died mid-save (SIGKILL, power loss) left in ``folder``.

    A staging ``.name.tmp-PID-*`` or a half-deleted ``.name.del-PID`` of a dead process of this host is
    removed (another host's are never touched); a ``.name.old-PID`` (the previous version, swapped out) is renamed back to
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
        if not match or (only is not None and match["name"] != only) or _alive(int(match["pid"]), match["host"]):
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


def _alive(pid: int, host: str | None = None) -> bool:
    """Whether the writer ``pid`` may still be at work: always, when it ran on another host (unknowable here)."""
    if host is not None and host != THIS_HOST:
        return True
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
        retired = target.with_name(f".{target.name}.old-{work_tag()}")
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
