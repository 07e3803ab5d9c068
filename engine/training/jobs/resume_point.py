"""Where a stopped run continues from: its newest checkpoint that is whole, passing over damaged ones.

A checkpoint is listed when its files are there (``run_folder.is_complete``); whether they can be read
is checked only here, just before continuing, because it means reading them: ``training_state.pt`` must
load (weights only) and hold this version's state with its training settings, ``config.json`` must be a
model configuration and ``model.safetensors`` must open with the tensors it names. The newest checkpoint
that passes is the resume point; each newer one passed over is named with why, so the status can say
"continuing from step-000100: step-000150 is damaged (...)". No good checkpoint at all is a ``ValueError``
naming the newest one's damage. An older checkpoint of a lean run (``keep_optimizer_state="newest"``) keeps no
optimizer state, so it is no resume point: a lean run whose newest checkpoint is damaged cannot continue, and
says so (its checkpoints still load as start models). A finished run with ``keep_optimizer_state="while-running"``
(a fine-tune's default) kept no optimizer state in its last checkpoint either: it is refused with
``finished_lean_refusal``'s sentence, which says to start a new fine-tune from that checkpoint.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from safetensors import safe_open

from engine.model.families.registry import load_config
from engine.regular_files import require_regular
from engine.training.runs.run_folder import CheckpointInfo, RunFolder
from engine.training.loop.config import TrainingConfig
from engine.training.runs.state import (STATE_FILE, finished_lean_refusal, has_optimizer_state, is_finished_lean,
                                        read_training_state)

NO_OPTIMIZER_STATE = f"{STATE_FILE} keeps no optimizer state (only a run's newest checkpoint does)"
FINISHED_LEAN = "the run finished and its last checkpoint keeps only the model (keep_optimizer_state while-running)"


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a run continues from, and the newer ones passed over as damaged (name, why)."""

    checkpoint: CheckpointInfo
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def note(self) -> str | None:
        """"Continuing from step-000100 because step-000150 is damaged (model.safetensors cannot be read)."
        (None when the newest checkpoint was good)."""
        if not self.skipped:
            return None
        damaged = "; ".join(f"{name} is damaged ({why})" for name, why in self.skipped)
        return f"Continuing from {self.checkpoint.name}, the newest good checkpoint, because {damaged}."


def checkpoint_problem(path: str | Path) -> str | None:
    """What keeps the checkpoint ``path`` from being continued (a short reason without server paths), or None."""
    path = Path(path)
    try:
        state = read_training_state(path)
        TrainingConfig.from_dict(state["config"])
    except Exception as exc:  # noqa: BLE001 - a damaged file fails in many ways; each is "damaged"
        return f"{STATE_FILE} cannot be read" + ("" if isinstance(exc, ValueError) else f" ({type(exc).__name__})")
    if is_finished_lean(state):             # the last checkpoint of a finished lean run: it cannot go on
        return FINISHED_LEAN
    if not has_optimizer_state(state):     # an older checkpoint of a lean run: a model, not a resume point
        return NO_OPTIMIZER_STATE
    try:
        load_config(path / "config.json")
    except Exception:  # noqa: BLE001
        return "config.json is not a model configuration"
    try:
        with safe_open(str(require_regular(path / "model.safetensors")), framework="pt") as weights:
            if not list(weights.keys()):
                return "model.safetensors holds no tensors"
    except Exception:  # noqa: BLE001
        return "model.safetensors cannot be read"
    return None


def resume_point(run: RunFolder) -> ResumePoint:
    """The newest checkpoint of ``run`` that can be continued; ValueError (saying why) when none can."""
    found = run.checkpoints()
    if not found:
        raise ValueError(f"the run {run.name} has no complete checkpoint to continue from")
    skipped: list[tuple[str, str]] = []
    for info in found:
        problem = checkpoint_problem(info.path)
        if problem is None:
            return ResumePoint(info, tuple(skipped))
        if problem == FINISHED_LEAN:         # its end: no older checkpoint continues it either
            raise ValueError(finished_lean_refusal(run.name, info.name))
        skipped.append((info.name, problem))
    name, why = skipped[0]
    if any(problem == NO_OPTIMIZER_STATE for _, problem in skipped):
        raise ValueError(f"the run {run.name} cannot continue: its newest checkpoint, {name}, is damaged ({why}) and "
                         f"the older ones keep no optimizer state (only the newest does); start a new run from one "
                         f"of them (it loads as a model)")
    raise ValueError(f"every checkpoint of the run {run.name} is damaged (the newest, {name}: {why}), so it "
                     "cannot continue; start a new run")
