"""Training state on disk: atomic checkpoint writing, the resumable state, RNG, metrics.jsonl.

Where these files go inside a run is ``engine.training.runs.run_folder``'s business.

A checkpoint is ``<run_dir>/checkpoints/step-XXXXXX/`` holding the Hugging Face layout
(``config.json``, ``model.safetensors``, ``vocab.txt``, ``tokenizer.json``, written by
``engine.checkpoints.hf_format.save``) plus ``explorer_state.json`` (step, metrics, settings; small,
for listing) and ``training_state.pt`` (optimizer, scheduler, step, data position, RNG,
config; only the newest checkpoint of a run keeps the optimizer and scheduler state unless
``keep_optimizer_state`` is ``"all"``: ``drop_optimizer_state`` rewrites the older ones atomically; under
``"while-running"`` a finished run's last checkpoint is written without them too, ``is_finished_lean``). The
whole directory is assembled under a hidden staging name and renamed in at once; ``training_state.pt`` is
written last, and a directory without it is never listed and never resumed from. Pruned checkpoints are renamed to a hidden name before
they are deleted, and leftovers of a writer killed mid-save are cleaned up on listing. ``training_state.pt`` holds only tensors and plain
containers, so it loads with ``torch.load(weights_only=True)``.

``explorer_state.json`` was called ``trainer_state.json`` until that name was found to mislead; runs written
before the rename keep loading: ``read_checkpoint_info`` falls back to the old name (``runs.legacy``).
"""
from __future__ import annotations

import json
import logging
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from engine.checkpoints.hf_format import save, work_tag
from engine.disk_faults import writing
from engine.regular_files import open_regular, read_bytes, reason
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.runs.legacy import LEGACY_INFO_FILE, is_hf_trainer_state, is_ours
from engine.training.runs.records import CheckpointRecord, Damaged, MetricsLine

logger = logging.getLogger(__name__)

STATE_FILE = "training_state.pt"
INFO_FILE = "explorer_state.json"          # our own name: no tool takes it for the HF Trainer's state file
STATE_FORMAT = 1
MAX_RECORD_BYTES = 4 << 20                 # explorer_state.json and the like: small records
MAX_METRICS_BYTES = 256 << 20              # metrics.jsonl of a very long run


def write_checkpoint(model: BertWithHeads, tokenizer: WordPieceTokenizer | None, directory: str | Path,
                     state: dict[str, Any], info: dict[str, Any], dtype: torch.dtype = torch.float32) -> Path:
    """Write model + tokenizer (HF layout), ``explorer_state.json`` and ``training_state.pt`` atomically.

    Everything goes to a hidden staging directory next to ``directory``, is fsynced, and
    only then renamed in, so ``directory`` is at every instant absent, the old version,
    or complete. An existing checkpoint at that name is replaced. ``dtype``: the weights' (``hf_format.save``);
    narrower than float32 only for a checkpoint that keeps no optimizer state (an exact resume needs float32).
    """
    def write_state(staging: Path) -> None:
        (staging / INFO_FILE).write_text(json.dumps(info, indent=1, default=_json_default) + "\n", encoding="utf-8")
        with open(staging / STATE_FILE, "wb") as handle:   # its presence marks a resumable checkpoint; through a
            torch.save(state, handle)                     # handle, torch's write error keeps the OSError as context

    return save(model, tokenizer, directory, extra=write_state, dtype=dtype)


def has_optimizer_state(state: dict[str, Any]) -> bool:
    """Whether a loaded ``training_state.pt`` still holds the optimizer and scheduler (a run's newest
    checkpoint always does; older ones lose them under ``keep_optimizer_state="newest"``)."""
    return "optimizer" in state and "scheduler" in state


def is_finished_lean(state: dict[str, Any]) -> bool:
    """Whether a loaded ``training_state.pt`` is the last checkpoint of a finished run that kept no optimizer state
    (``keep_optimizer_state="while-running"``: written at ``total_steps`` without it), so the run cannot continue."""
    config = state.get("config") if isinstance(state.get("config"), dict) else {}
    step, total = state.get("step"), config.get("total_steps")
    return (not has_optimizer_state(state) and config.get("keep_optimizer_state") == "while-running"
            and isinstance(step, int) and isinstance(total, int) and step >= total)


def finished_lean_refusal(run: str, checkpoint: str) -> str:
    """The one sentence that refuses to continue a finished lean run (``is_finished_lean``) and says how to go on."""
    return (f"the run {run} finished and kept only the model in its last checkpoint, {checkpoint}, not the "
            f"optimizer state (keep_optimizer_state while-running, a fine-tune's default), so it cannot continue; "
            f"start a new fine-tune from {checkpoint} instead (pick it as the Fine-tune tab's base model, or pass it "
            f"to --init-from)")


def drop_optimizer_state(checkpoint: str | Path) -> bool:
    """Rewrite ``checkpoint``'s ``training_state.pt`` without its optimizer and scheduler state (the rest:
    step, data position, RNG, settings, stays); False when it had none. Atomic: written to a hidden temp
    file beside it, fsynced, then ``os.replace``d, so the file is at every instant the old or the new one."""
    path = Path(checkpoint) / STATE_FILE
    for leftover in path.parent.glob(f".{STATE_FILE}.tmp-*"):     # a rewrite killed before its os.replace
        leftover.unlink(missing_ok=True)
    state = read_training_state(checkpoint)
    if not has_optimizer_state(state):
        return False
    lean = {key: value for key, value in state.items() if key not in ("optimizer", "scheduler")}
    temp = path.with_name(f".{path.name}.tmp-{work_tag()}")
    try:
        with writing(path.parent, f"rewriting {STATE_FILE} without the optimizer state"):
            with open(temp, "wb") as handle:
                torch.save(lean, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return True


def read_checkpoint_info(checkpoint: str | Path) -> dict[str, Any]:
    """The checkpoint's small record (step, epoch, metrics, eval_metrics, created, config): ``explorer_state.json``,
    or ``trainer_state.json`` in a run written before the rename; {} when neither is readable (a Hugging Face
    Trainer's ``trainer_state.json``, which has ``global_step``, is not ours and counts as none)."""
    checkpoint = Path(checkpoint)
    for name in (INFO_FILE, LEGACY_INFO_FILE):
        try:
            record = json.loads(read_bytes(checkpoint / name, MAX_RECORD_BYTES))
        except (OSError, ValueError, RecursionError):
            continue
        if is_ours(record):
            return record
    return {}


def read_checkpoint_record(checkpoint: str | Path) -> CheckpointRecord | Damaged | None:
    """The checkpoint's small record, checked (``CheckpointRecord.parse``): ``explorer_state.json``, else the
    legacy ``trainer_state.json``; None when it has neither (or only a Hugging Face Trainer's), ``Damaged``
    when the file is there but unreadable or holds a wrong value. Never raises."""
    checkpoint = Path(checkpoint)
    for name in (INFO_FILE, LEGACY_INFO_FILE):
        try:
            raw = read_bytes(checkpoint / name, MAX_RECORD_BYTES)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:      # unreadable, a pipe or device, or far too large
            return Damaged(f"{name} cannot be read ({reason(exc)})")
        parsed = CheckpointRecord.parse(raw)
        if name == LEGACY_INFO_FILE and is_hf_trainer_state(raw):    # a Hugging Face Trainer's file, not ours
            continue
        return Damaged(f"{name}: {parsed.reason}") if isinstance(parsed, Damaged) else parsed
    return None


def read_training_state(checkpoint: str | Path) -> dict[str, Any]:
    """Load ``training_state.pt`` (weights-only unpickling: tensors and plain containers)."""
    path = Path(checkpoint) / STATE_FILE
    if not path.is_file():
        raise ValueError(f"{checkpoint} has no {STATE_FILE}; it is not a resumable checkpoint")
    try:
        with open_regular(path) as handle:
            state = torch.load(handle, map_location="cpu", weights_only=True)
    except Exception as exc:  # damaged or foreign files fail in many ways; never fall back to full pickle
        raise ValueError(f"{path} is damaged or not a training state "
                         f"({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"{path} is not a training state this version can read")
    return state


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
    """Append one JSON object as one line and flush it; a disk fault is a ``DiskFault``."""
    line = json.dumps(record, default=_json_default) + "\n"
    with writing(Path(path).parent, f"appending to {Path(path).name}"), open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()


@dataclass
class MetricsFile:
    """The records of a ``metrics.jsonl`` and how many of its lines were skipped as damaged."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0                      # lines that are not UTF-8, not JSON objects or hold a bad step / kind
    first_problem: str | None = None      # "line 4: step is 'abc', not a whole number of at least 0"


def read_metrics_file(path: str | Path) -> MetricsFile:
    """Every good record of a ``metrics.jsonl`` (``MetricsLine.parse``) and the count of damaged lines, each
    skipped (a torn last line after a crash is skipped silently). Never raises: an unreadable file is
    no records and one skipped "line"."""
    path = Path(path)
    try:
        lines = read_bytes(path, MAX_METRICS_BYTES).split(b"\n")
    except FileNotFoundError:
        return MetricsFile()
    except (OSError, ValueError) as exc:
        return MetricsFile([], 1, f"the file cannot be read ({reason(exc)})")
    found = MetricsFile()
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parsed = MetricsLine.parse(line)
        if isinstance(parsed, MetricsLine):
            found.records.append(parsed.record)
        elif number - 1 != last or not isinstance(parsed, Damaged) or parsed.reason != "it is not valid JSON":
            found.skipped += 1
            found.first_problem = found.first_problem or f"line {number}: {parsed.reason}"
    return found


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every good record of a ``metrics.jsonl``; damaged lines are skipped with one logged warning
    (``read_metrics_file`` counts them), a torn last line (a crash mid-write) silently."""
    found = read_metrics_file(path)
    if found.skipped:
        logger.warning("%s: skipped %d damaged line%s (%s)", Path(path).name, found.skipped,
                       "" if found.skipped == 1 else "s", found.first_problem)
    return found.records


def truncate_metrics(path: str | Path, step: int) -> None:
    """Drop records after ``step`` (a resumed run re-logs them); rewritten atomically."""
    path = Path(path)
    if not path.exists():
        return
    kept = [r for r in read_metrics(path) if r.get("step", 0) <= step]   # steps are checked ints
    temp = path.with_name(f".{path.name}.tmp-{work_tag()}")
    try:
        with writing(path.parent, f"rewriting {path.name}"):
            with open(temp, "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps(r, default=_json_default) + "\n" for r in kept)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
