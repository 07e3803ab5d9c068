"""What the training worker refuses, as types: callers catch the kind of refusal, never match its words.

Every one is a ``ValueError`` (its message is written for the user, and the UI shows it as is); the
attributes say what was found, for callers that word it their own way.
"""
from __future__ import annotations

from engine.training.worker.run_state import RunState


class RunActiveError(ValueError):
    """A run is already active: ``start`` (or ``continue_run``) refuses a second one."""

    def __init__(self, state: RunState, run_name: str) -> None:
        super().__init__(f"a training run is already {state} ({run_name}); stop it before starting another")
        self.state, self.run_name = RunState(state), run_name


class NoRunError(ValueError):
    """No run is training, so there is nothing to act on (e.g. nothing to checkpoint)."""

    def __init__(self, state: RunState) -> None:
        super().__init__(f"no run is training (the worker is {state}); nothing to checkpoint")
        self.state = RunState(state)


class RunEndedError(ValueError):
    """The run ended (failed or diverged) before a request to it was served."""

    def __init__(self, state: RunState, message: str) -> None:
        super().__init__(f"the run ended ({state}) before the checkpoint was written: {message}")
        self.state, self.run_message = RunState(state), message


class CannotContinueError(ValueError):
    """A run cannot be continued: it is gone, has no complete checkpoint, or the new total is too small."""


class RunFolderError(ValueError):
    """The run's folder cannot be created (a read-only or full data folder); nothing was started."""


__all__ = ["CannotContinueError", "NoRunError", "RunActiveError", "RunEndedError", "RunFolderError"]
