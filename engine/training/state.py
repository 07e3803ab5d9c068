"""Training checkpoints on disk: atomic writing, listing, resumable state, RNG, metrics.jsonl.

A checkpoint is ``<run_dir>/checkpoints/step-XXXXXX/`` holding the Hugging Face layout
(``config.json``, ``model.safetensors``, ``vocab.txt``, ``tokenizer.json``, written by
``engine.checkpoints.hf_format.save``) plus ``trainer_state.json`` (step, metrics; small, for
listing) and ``training_state.pt`` (optimizer, scheduler, step, data position, RNG,
config). The whole directory is assembled under a hidden staging name and renamed in
at once; ``training_state.pt`` is written last, and a directory without it is never
listed and never resumed from. Pruned checkpoints are renamed to a hidden name before
they are deleted, and leftovers of a writer killed mid-save are cleaned up on listing. ``training_state.pt`` holds only tensors and plain
containers, so it loads with ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from engine.checkpoints.hf_format import recover_interrupted_writes, save
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer

STATE_FILE = "training_state.pt"
INFO_FILE = "trainer_state.json"
METRICS_FILE = "metrics.jsonl"
CHECKPOINTS_DIR = "checkpoints"
STATE_FORMAT = 1
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass
class CheckpointInfo:
    """A complete (resumable) checkpoint of a run."""

    path: Path
    step: int
    epoch: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)       # the last training metrics before it
    eval_metrics: dict[str, Any] | None = None                   # the evaluation at this step, if any
    created: float = 0.0                                         # time.time() when written

    @property
    def name(self) -> str:
        return self.path.name


def checkpoint_name(step: int) -> str:
    """``step-000123``."""
    return f"step-{step:06d}"


def is_complete(directory: str | Path) -> bool:
    """True when ``directory`` holds weights, config and ``training_state.pt`` (resumable)."""
    directory = Path(directory)
    return all((directory / name).is_file() for name in ("config.json", "model.safetensors", STATE_FILE))


def list_checkpoints(run_dir: str | Path) -> list[CheckpointInfo]:
    """The run's complete checkpoints, newest (highest step) first; incomplete ones are skipped.

    What a writer killed mid-save left behind is cleaned up first (``recover_interrupted_writes``):
    its staging directory goes, and a checkpoint it was replacing is put back.
    """
    folder = Path(run_dir) / CHECKPOINTS_DIR
    if not folder.is_dir():
        return []
    recover_interrupted_writes(folder)
    found = []
    for path in folder.iterdir():
        match = _STEP_DIR.match(path.name)
        if not match or not path.is_dir() or not is_complete(path):
            continue
        info: dict[str, Any] = {}
        try:
            info = json.loads((path / INFO_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass  # the listing only loses its metrics; the checkpoint itself is complete
        found.append(CheckpointInfo(path, int(match.group(1)), int(info.get("epoch", 0)), info.get("metrics") or {},
                                    info.get("eval_metrics"), float(info.get("created", 0.0))))
    return sorted(found, key=lambda c: c.step, reverse=True)


def resolve_checkpoint(source: str | Path) -> Path:
    """A checkpoint directory from itself or from a run directory (its newest complete one)."""
    source = Path(source)
    if not source.is_dir():
        raise FileNotFoundError(f"no run or checkpoint directory at {source}")
    if is_complete(source):
        return source
    if (source / CHECKPOINTS_DIR).is_dir():
        checkpoints = list_checkpoints(source)
        if not checkpoints:
            raise FileNotFoundError(f"the run {source} has no complete checkpoint to resume from")
        return checkpoints[0].path
    if (source / "config.json").exists():
        raise ValueError(f"{source} has no {STATE_FILE}: it is a model, not a complete training checkpoint, "
                         "so training cannot resume from it (it can still be loaded for probing)")
    raise FileNotFoundError(f"{source} is neither a run directory nor a training checkpoint")


def write_checkpoint(model: BertWithHeads, tokenizer: WordPieceTokenizer | None, directory: str | Path,
                     state: dict[str, Any], info: dict[str, Any]) -> Path:
    """Write model + tokenizer (HF layout), ``trainer_state.json`` and ``training_state.pt`` atomically.

    Everything goes to a hidden staging directory next to ``directory``, is fsynced, and
    only then renamed in, so ``directory`` is at every instant absent, the old version,
    or complete. An existing checkpoint at that name is replaced.
    """
    def write_state(staging: Path) -> None:
        (staging / INFO_FILE).write_text(json.dumps(info, indent=1, default=_json_default) + "\n", encoding="utf-8")
        torch.save(state, staging / STATE_FILE)  # its presence marks a resumable checkpoint

    return save(model, tokenizer, directory, extra=write_state)


def read_training_state(checkpoint: str | Path) -> dict[str, Any]:
    """Load ``training_state.pt`` (weights-only unpickling: tensors and plain containers)."""
    path = Path(checkpoint) / STATE_FILE
    if not path.is_file():
        raise ValueError(f"{checkpoint} has no {STATE_FILE}; it is not a resumable checkpoint")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # damaged or foreign files fail in many ways; never fall back to full pickle
        raise ValueError(f"{path} is damaged or not a training state "
                         f"({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"{path} is not a training state this version can read")
    return state


def prune_checkpoints(run_dir: str | Path, keep: int | None) -> list[Path]:
    """Delete all but the ``keep`` newest complete checkpoints (``None`` keeps all); returns the deleted."""
    if keep is None:
        return []
    removed = []
    for info in list_checkpoints(run_dir)[keep:]:
        # Renamed away first (atomic), so a crash mid-delete never leaves a half checkpoint at a step name.
        doomed = info.path.with_name(f".{info.path.name}.del-{os.getpid()}")
        try:
            os.rename(info.path, doomed)
        except OSError:
            continue
        shutil.rmtree(doomed, ignore_errors=True)
        removed.append(info.path)
    return removed


# ---------------------------------------------------------------------------- RNG
def capture_rng() -> dict[str, Any]:
    """Python's and torch's (CPU and every CUDA device's) generator states, weights-only safe."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put back the generator states ``capture_rng`` took."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def set_seed(seed: int) -> None:
    """Seed Python's and torch's global generators (dropout draws from torch's)."""
    random.seed(seed)
    torch.manual_seed(seed)


# ---------------------------------------------------------------------------- metrics.jsonl
def append_metrics(path: str | Path, record: dict[str, Any]) -> None:
    """Append one JSON object as one line and flush it."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, default=_json_default) + "\n")
        handle.flush()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a ``metrics.jsonl``; a torn last line (a crash mid-write) is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def truncate_metrics(path: str | Path, step: int) -> None:
    """Drop records after ``step`` (a resumed run re-logs them); rewritten atomically."""
    path = Path(path)
    if not path.exists():
        return
    kept = [r for r in read_metrics(path) if int(r.get("step", 0)) <= step]
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temp, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, default=_json_default) + "\n" for r in kept)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
