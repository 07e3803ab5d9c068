"""engine.training.loop.callbacks: the trainer calls out (hooks in order, a lock around steps and evaluations)
instead of being patched; the worker, the command lines and these tests see a run only that way."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.model.heads import BertWithHeads
from engine.training.loop.callbacks import TrainerCallback
from engine.training.loop.config import TrainingConfig
from engine.training.tasks import task_for
from engine.training.loop.resume import resume
from engine.training.loop.trainer import Trainer
from engine.training.tasks.pretraining import build_datasets
from tests.conftest import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")


def documents(count: int = 16) -> list[list[str]]:
    words = list(WORDS)
    return [[" ".join(words[(d * 5 + s * 3 + k) % len(words)] for k in range(6)) + "." for s in range(6)]
            for d in range(count)]


def trainer_for(tmp_path: Path, tokenizer, make_config, callbacks=(), lock=None, **settings) -> Trainer:
    values = dict(total_steps=4, batch_size=4, max_seq_length=32, warmup_steps=0, eval_every=2, eval_batches=1,
                  checkpoint_every=3, learning_rate=1e-3)
    values.update(settings)
    config = TrainingConfig(**values)
    docs = documents()
    train, held_out = build_datasets(docs[:-4], docs[-4:], tokenizer, config)
    torch.manual_seed(0)
    return Trainer(BertWithHeads(make_config()), tokenizer, train, held_out, config, tmp_path / "run",
                   callbacks=callbacks, lock=lock, task=task_for(config))


class Recorder(TrainerCallback):
    """Writes down every hook the trainer calls, with the step it was called at."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def should_stop(self, trainer):
        self.calls.append(("should_stop", trainer.global_step))
        return False

    def on_step_begin(self, trainer):
        self.calls.append(("step_begin", trainer.global_step))

    def on_batch(self, trainer, batch):
        self.calls.append(("batch", trainer.global_step, int(batch.input_ids.shape[0])))

    def on_step_end(self, trainer, metrics):
        self.calls.append(("step_end", metrics["step"]))

    def on_evaluate(self, trainer, metrics):
        self.calls.append(("evaluate", metrics["step"]))

    def on_save(self, trainer, path):
        self.calls.append(("save", path.name))

    def on_log(self, trainer, kind, record):
        self.calls.append(("log", kind, record["step"]))


def test_hooks_are_called_in_order_with_the_right_records(tmp_path, tiny_tokenizer, make_config):
    recorder = Recorder()
    trainer = trainer_for(tmp_path, tiny_tokenizer, make_config, [recorder], gradient_accumulation_steps=2)
    assert trainer.train().status == "finished"
    step_one = [("should_stop", 0), ("step_begin", 0), ("batch", 0, 4), ("batch", 0, 4), ("step_end", 1),
                ("log", "train", 1)]
    assert recorder.calls[:6] == step_one                           # two micro-batches per step
    assert recorder.calls[6:14] == [("should_stop", 1), ("step_begin", 1), ("batch", 1, 4), ("batch", 1, 4),
                                    ("step_end", 2), ("log", "train", 2), ("evaluate", 2), ("log", "eval", 2)]
    saves = [c for c in recorder.calls if c[0] == "save"]
    assert saves == [("save", "step-000003"), ("save", "step-000004")]   # the interval, and the last step
    assert [c for c in recorder.calls if c[0] == "should_stop"] == [("should_stop", s) for s in range(4)]


def test_should_stop_ends_the_loop_before_the_next_step(tmp_path, tiny_tokenizer, make_config):
    class StopAfterTwo(TrainerCallback):
        def should_stop(self, trainer):
            return trainer.global_step >= 2

    recorder = Recorder()
    trainer = trainer_for(tmp_path, tiny_tokenizer, make_config, [StopAfterTwo(), recorder])
    result = trainer.train()
    assert (result.status, result.step, trainer.global_step) == ("stopped", 2, 2)
    assert recorder.calls[-1] == ("should_stop", 2)                # every callback was still asked


def test_the_function_shorthand_is_a_callback_for_one_call(tmp_path, tiny_tokenizer, make_config):
    events: list[tuple[str, int]] = []
    trainer = trainer_for(tmp_path, tiny_tokenizer, make_config)
    trainer.train(num_steps=3, callback=lambda kind, record: events.append((kind, record["step"])))
    assert events == [("train", 1), ("train", 2), ("eval", 2), ("train", 3), ("checkpoint", 3)]
    assert trainer.callbacks.callbacks == []                          # gone after the call
    with pytest.raises(TypeError, match="must be a TrainerCallback"):
        trainer.add_callback(lambda kind, record: None)


def test_a_failing_callback_ends_the_run_and_leaves_its_checkpoints(tmp_path, tiny_tokenizer, make_config):
    class Broken(TrainerCallback):
        def on_step_end(self, trainer, metrics):
            if metrics["step"] == 4:
                raise RuntimeError("the observer broke")

    trainer = trainer_for(tmp_path, tiny_tokenizer, make_config, [Broken()], total_steps=6)
    with pytest.raises(RuntimeError, match="the observer broke"):
        trainer.train()
    assert trainer.global_step == 4 and [c.step for c in trainer.checkpoints()] == [3]
    again = resume(tmp_path / "run", trainer.task, trainer.train_data, trainer.eval_data)
    assert again.global_step == 3 and again.train().status == "finished"


def test_the_lock_is_held_for_every_step_and_evaluation(tmp_path, tiny_tokenizer, make_config):
    """A reader that takes the lock (the worker's snapshot) never sees weights in the middle of a step."""
    class WatchedLock:
        def __init__(self) -> None:
            self.inner, self.held, self.entries = threading.Lock(), False, 0

        def __enter__(self):
            self.inner.acquire()
            self.held, self.entries = True, self.entries + 1

        def __exit__(self, *exc):
            self.held = False
            self.inner.release()

    class CheckHeld(TrainerCallback):
        def __init__(self, lock: WatchedLock) -> None:
            self.lock, self.seen = lock, []

        def on_batch(self, trainer, batch):         # read inside the step
            self.seen.append(("batch", self.lock.held))

        def on_step_end(self, trainer, metrics):    # after the step
            self.seen.append(("end", self.lock.held))

    lock = WatchedLock()
    check = CheckHeld(lock)
    trainer = trainer_for(tmp_path, tiny_tokenizer, make_config, [check], lock=lock)
    trainer.train()
    assert lock.entries == 4 + 2                      # four steps and two evaluations (steps 2 and 4)
    assert set(check.seen) == {("batch", True), ("end", False)}
    trainer.evaluate()
    assert lock.entries == 7 and not lock.held


@pytest.mark.slow
def test_a_concurrent_reader_sees_whole_steps_only(tmp_path, tiny_tokenizer, make_config):
    lock = threading.Lock()
    trainer = trainer_for(tmp_path, tiny_tokenizer, make_config, lock=lock, total_steps=12, eval_every=0,
                          checkpoint_every=0)
    snapshots: list[tuple[int, dict[str, torch.Tensor]]] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            with lock:
                snapshots.append((trainer.global_step, {k: v.clone() for k, v in trainer.model.state_dict().items()}))

    thread = threading.Thread(target=reader)
    thread.start()
    weights = {0: {k: v.clone() for k, v in trainer.model.state_dict().items()}}
    for _ in range(12):
        trainer.step()
        weights[trainer.global_step] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    done.set()
    thread.join()
    assert snapshots
    for step, state in snapshots:                      # each copy is exactly the weights after some step
        assert all(torch.equal(state[k], weights[step][k]) for k in state), step
