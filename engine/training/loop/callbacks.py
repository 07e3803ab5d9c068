"""Trainer callbacks, in the style of Hugging Face's ``TrainerCallback``: the points where code outside
the training loop (the app's worker, the command lines' progress bar, tests) sees and steers a run.

The trainer calls every registered callback, in order, on the training thread:

* ``should_stop(trainer)`` before every step; it may block (to pause, or to let an interactive
  request run first) and answers True to end the loop (the trainer then returns ``stopped``);
* ``on_step_begin(trainer)``, ``on_batch(trainer, batch)`` for each training micro-batch the step
  reads, ``on_step_end(trainer, metrics)``;
* ``on_evaluate(trainer, metrics)`` after a held-out evaluation, ``on_save(trainer, path)`` after a
  checkpoint is written;
* ``on_log(trainer, kind, record)`` for every record the trainer appends to ``metrics.jsonl``
  (``train``, ``eval``, ``checkpoint``, ``diverged``; main process only);
* ``on_train_end(trainer)`` when a ``Trainer.train`` call returns or raises (a callback closes its files).

Nothing here replaces a method of the trainer or of its data: the trainer owns the loop and
calls out. An exception raised by a callback ends ``Trainer.train`` (checkpoints already written
stay as they are).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

Trainer = Any   # engine.training.loop.trainer.Trainer, which imports this module (named here for the signatures)


class TrainerCallback:
    """Base class: every hook does nothing; subclasses override the ones they need."""

    def should_stop(self, trainer: Trainer) -> bool:
        return False

    def on_step_begin(self, trainer: Trainer) -> None:
        pass

    def on_batch(self, trainer: Trainer, batch: Any) -> None:
        pass

    def on_step_end(self, trainer: Trainer, metrics: dict[str, Any]) -> None:
        pass

    def on_evaluate(self, trainer: Trainer, metrics: dict[str, Any]) -> None:
        pass

    def on_save(self, trainer: Trainer, path: Path) -> None:
        pass

    def on_log(self, trainer: Trainer, kind: str, record: dict[str, Any]) -> None:
        pass

    def on_train_end(self, trainer: Trainer) -> None:
        pass


class FunctionCallback(TrainerCallback):
    """``Trainer.train(callback=..., should_stop=...)``: two plain functions as a callback.

    ``callback(kind, record)`` gets every logged record and a ``checkpoint`` record ({step, path}) for
    every checkpoint written; ``should_stop()`` is asked before every step.
    """

    def __init__(self, callback: Callable[[str, dict[str, Any]], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> None:
        self._callback, self._should_stop = callback, should_stop

    def should_stop(self, trainer: Trainer) -> bool:
        return self._should_stop is not None and bool(self._should_stop())

    def on_log(self, trainer: Trainer, kind: str, record: dict[str, Any]) -> None:
        if self._callback is not None:
            self._callback(kind, record)

    def on_save(self, trainer: Trainer, path: Path) -> None:
        if self._callback is not None:
            self._callback("checkpoint", {"step": trainer.global_step, "path": str(path)})


class CallbackList:
    """The trainer's callbacks, called in order."""

    def __init__(self, callbacks: Sequence[TrainerCallback] = ()) -> None:
        self.callbacks = list(callbacks)

    def add(self, callback: TrainerCallback) -> None:
        if not isinstance(callback, TrainerCallback):
            raise TypeError(f"a callback must be a TrainerCallback, got {type(callback).__name__}")
        self.callbacks.append(callback)

    def remove(self, callback: TrainerCallback) -> None:
        self.callbacks.remove(callback)

    def should_stop(self, trainer: Trainer) -> bool:
        """True when any callback asks to stop (every one is asked, so each can serve its requests)."""
        answers = [callback.should_stop(trainer) for callback in self.callbacks]
        return any(answers)

    def call(self, hook: str, trainer: Trainer, *args: Any) -> None:
        """Call ``hook`` (``on_step_begin``, ``on_batch``, ...) on every callback."""
        for callback in self.callbacks:
            getattr(callback, hook)(trainer, *args)
