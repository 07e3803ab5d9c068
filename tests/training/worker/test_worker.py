"""The background training worker: lifecycle, controls, priority, snapshots, crashes, divergence."""
from __future__ import annotations

import random
import threading
import time

import pytest
import torch

import engine
from engine.model.heads import BertWithHeads
from engine.data.masking import IGNORE_INDEX, KIND_KEPT, KIND_MASK, KIND_NONE, KIND_RANDOM
from engine.training.loop.trainer import Trainer
from engine.training.runs.run_folder import is_complete
from engine.training.tasks.job_spec import JobSpec
from engine.training.worker.errors import NoRunError, RunActiveError
from engine.training.worker.training_worker import TrainingWorker
from tests.conftest import WORDS

MODEL = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
TIMEOUT = 30.0


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def worker(tmp_path):
    w = TrainingWorker(tmp_path / "runs")
    yield w
    w.close(timeout_s=TIMEOUT)
    assert w.join(TIMEOUT), "a training thread did not end"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from tests.conftest import VOCAB
    from engine.text.tokenizer import WordPieceTokenizer

    directory = tmp_path_factory.mktemp("tokenizer")
    WordPieceTokenizer.from_vocab({tok: i for i, tok in enumerate(VOCAB)}).save(directory)
    return directory


def documents(n_docs: int = 24, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    words = list(WORDS)
    return [[" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) + "." for _ in range(8)]
            for _ in range(n_docs)]


def spec(tokenizer_dir=None, **training) -> JobSpec:
    values = dict(total_steps=100_000, batch_size=8, max_seq_length=32, eval_every=0, eval_batches=2,
                  checkpoint_every=0, warmup_steps=2, learning_rate=1e-3)
    values.update(training)
    return JobSpec(values, preset="tiny", model_overrides=dict(MODEL), documents=documents(),
                   tokenizer=None if tokenizer_dir is None else str(tokenizer_dir))


def wait_for(predicate, timeout: float = TIMEOUT, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_state(worker: TrainingWorker, *states: str, timeout: float = TIMEOUT):
    return wait_for(lambda: worker.status() if worker.status().state in states else None, timeout,
                    f"state in {states} (now {worker.status().state}: {worker.status().message})")


def wait_step(worker: TrainingWorker, step: int):
    def reached():
        status = worker.status()
        assert status.state.is_active, f"the run ended before step {step}: {status}"
        return status.step >= step
    return wait_for(reached, what=f"step {step}")


def held_step(worker: TrainingWorker) -> int:
    """The step once the trainer is waiting between steps (the step in flight has finished)."""
    wait_for(lambda: worker.status().waiting, what="the trainer to wait between steps")
    return worker.trainer.global_step


# ---------------------------------------------------------------------------- lifecycle
def test_run_lifecycle_metrics_checkpoints_and_batch(worker):
    run_spec = JobSpec(dict(total_steps=16, batch_size=8, max_seq_length=32, eval_every=8, eval_batches=2,
                            checkpoint_every=8, warmup_steps=2), preset="tiny", model_overrides=dict(MODEL),
                       corpus="shakespeare", max_documents=30, vocab_size=300)
    info = worker.start(run_spec)
    states = [worker.status().state]
    records, index = [], 0
    deadline = time.monotonic() + TIMEOUT
    while worker.status().state.is_active and time.monotonic() < deadline:
        state = worker.status().state
        if state != states[-1]:
            states.append(state)
        new, index = worker.metrics_since(index)
        records += new
        time.sleep(0.002)
    new, index = worker.metrics_since(index)
    records += new
    status = worker.status()
    assert status.state == "finished" and status.outcome == "finished", status
    if states[-1] != "finished":
        states.append("finished")
    assert states[0] == "preparing" and states == [s for s in ("preparing", "running", "finished") if s in states]
    assert status.step == status.total_steps == 16 and status.run_dir == info.run_dir
    assert status.metrics["step"] == 16 and status.eval_metrics["step"] == 16 and status.error is None

    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, 17))
    assert all(r["mlm_loss"] > 0 and r["tokens_per_s"] > 0 for r in train)
    assert [r["step"] for r in records if r["kind"] == "eval"] == [8, 16]
    assert [r["step"] for r in records if r["kind"] == "checkpoint"] == [8, 16]
    assert worker.metrics_since(index) == ([], index) and index == status.records
    assert worker.metrics_since(0)[0] == records

    checkpoints = worker.checkpoints()
    assert [c.step for c in checkpoints] == [16, 8] and all(c.path.parent.parent == info.run_dir for c in checkpoints)
    loaded = engine.load(checkpoints[0].path)
    assert "mlm" in loaded.heads and loaded.tokenizer.vocab_size == loaded.config.vocab_size <= 300
    assert loaded.config.hidden_size == 32
    assert (info.run_dir / "tokenizer" / "vocab.txt").is_file()

    batch = worker.current_batch()
    assert batch["step"] == 16 and 1 <= len(batch["rows"]) <= 2
    assert batch["mask_mix"] == [0.8, 0.1, 0.1] and batch["mask_token"] == loaded.tokenizer.mask_token   # the legend's
    assert_batch_consistent(batch, loaded.tokenizer)


def assert_batch_consistent(batch, tokenizer):
    for row in batch["rows"]:
        n = len(row["input_ids"])
        assert n == len(row["labels"]) == len(row["mask_kind"]) == len(row["tokens"]) == len(row["label_tokens"])
        assert row["tokens"][0] == "[CLS]" and row["tokens"][-1] == "[SEP]"
        for token_id, token, label, kind, name in zip(row["input_ids"], row["tokens"], row["labels"],
                                                      row["mask_kind"], row["mask_kind_names"]):
            assert (label == IGNORE_INDEX) == (kind == KIND_NONE)
            assert token == tokenizer.id_to_token(token_id)
            if kind == KIND_MASK:
                assert token == "[MASK]" and name == "[MASK]"
            elif kind == KIND_KEPT:
                assert token_id == label and name == "kept"
            elif kind == KIND_RANDOM:
                assert name == "random"
    assert sum(k != KIND_NONE for row in batch["rows"] for k in row["mask_kind"]) > 0


# ---------------------------------------------------------------------------- controls
def test_pause_resume_save_now_and_stop(worker, tokenizer_dir):
    info = worker.start(spec(tokenizer_dir))
    wait_step(worker, 3)
    assert worker.pause().state == "paused"
    assert worker.pause().state == "paused"                    # idempotent
    step = held_step(worker)
    time.sleep(0.5)
    assert worker.trainer.global_step == step and worker.status().step == step
    assert worker.status().state == "paused" and worker.status().eta_s is None      # no ETA while paused
    assert worker.status().message == f"paused at step {step}"

    path = worker.save_checkpoint_now(timeout_s=TIMEOUT)
    assert path is not None and is_complete(path) and path.name == f"step-{step:06d}"
    assert worker.checkpoints()[0].path == path
    assert worker.trainer.global_step == step                  # saving did not unpause

    assert worker.resume().state == "running"
    wait_step(worker, step + 3)
    path = worker.save_checkpoint_now(timeout_s=TIMEOUT)       # while running: between two steps
    assert path is not None and is_complete(path)

    worker.stop()
    status = wait_state(worker, "stopped", "finished", "failed", "diverged")
    assert status.state == "stopped" and status.outcome == "stopped", status
    final = worker.checkpoints()[0]
    assert final.step == status.step == worker.trainer.global_step and final.path.parent.parent == info.run_dir
    assert status.last_checkpoint == final.path and "stopped at step" in status.message
    kinds = [r["kind"] for r in worker.metrics_since(0)[0]]
    assert kinds.count("checkpoint") == 3
    # controls on an ended run are harmless no-ops
    assert worker.pause().state == worker.resume().state == worker.stop().state == "stopped"
    with pytest.raises(NoRunError, match="no run is training") as refused:
        worker.save_checkpoint_now(timeout_s=1)
    assert refused.value.state == "stopped" and isinstance(refused.value, ValueError)


def test_pause_while_preparing_holds_before_the_first_step(worker, tokenizer_dir):
    worker.start(spec(tokenizer_dir))
    assert worker.pause().state == "preparing"                 # takes effect once the run is ready
    assert wait_state(worker, "paused").step == 0
    assert held_step(worker) == 0 and worker.current_batch() is None
    time.sleep(0.2)
    assert worker.trainer.global_step == 0
    worker.stop()
    status = wait_state(worker, "stopped", "finished", "failed", "diverged")
    assert status.state == status.outcome == "stopped" and status.step == 0 and worker.checkpoints() == []


def test_elapsed_counts_from_start_on_the_workers_clock(tmp_path, tokenizer_dir):
    """"elapsed" is the time since Start, whatever the stage, and stops when the run ends (an injected clock)."""
    now = [1000.0]
    w = TrainingWorker(tmp_path / "runs", clock=lambda: now[0])
    try:
        w.start(spec(tokenizer_dir))
        w.pause()                                               # held before the first step
        now[0] = 1076.0
        assert w.status().elapsed == 76.0
        assert wait_state(w, "paused").elapsed == 76.0
        w.stop()
        ended = wait_state(w, "stopped")
        now[0] = 2000.0
        assert ended.elapsed == w.status().elapsed == 76.0, "an ended run's time stops at its end"
    finally:
        w.close(timeout_s=TIMEOUT)


def test_start_while_active_refuses_and_concurrent_clicks_are_safe(worker, tokenizer_dir):
    worker.start(spec(tokenizer_dir))
    first = worker.status()
    with pytest.raises(RunActiveError) as refused:
        worker.start(spec(tokenizer_dir))
    assert str(refused.value) == (f"a training run is already {refused.value.state} ({first.run_dir.name}); "
                                  "stop it before starting another")
    assert refused.value.state.is_active and refused.value.run_name == first.run_dir.name
    worker.stop(wait_s=TIMEOUT)
    assert worker.status().state == "stopped"

    errors, starts = [], []
    barrier = threading.Barrier(8)

    def clicker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            barrier.wait(timeout=TIMEOUT)
            for _ in range(12):
                action = rng.choice(("start", "stop", "pause", "resume", "status"))
                if action == "start":
                    try:
                        starts.append(worker.start(spec(tokenizer_dir)))
                    except RunActiveError:
                        pass
                else:
                    getattr(worker, action)()
                worker.metrics_since(0)
                time.sleep(rng.random() * 0.02)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=clicker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    worker.resume()
    worker.stop()
    assert worker.join(TIMEOUT)
    status = worker.status()
    assert status.state == "stopped" and status.outcome == "stopped" and status.error is None, status
    assert len({info.run_dir for info in starts}) == len(starts)          # every run got its own directory
    if starts:
        assert status.run_id == max(info.run_id for info in starts)
    worker.start(spec(tokenizer_dir, total_steps=3))                       # still usable
    assert wait_state(worker, "finished", "failed").outcome == "finished"


def test_priority_holds_the_trainer_between_steps(worker, tokenizer_dir):
    worker.start(spec(tokenizer_dir))
    wait_step(worker, 2)
    release_inner = threading.Event()
    inner_entered = threading.Event()

    def other_session() -> None:
        with worker.priority():
            inner_entered.set()
            release_inner.wait(TIMEOUT)

    with worker.priority():
        with worker.priority():                                  # nested in one thread
            step = held_step(worker)
            time.sleep(0.3)
            assert worker.trainer.global_step == step
        thread = threading.Thread(target=other_session)
        thread.start()
        assert inner_entered.wait(TIMEOUT)
        time.sleep(0.2)
        assert worker.trainer.global_step == step
    time.sleep(0.3)                                              # outer released, another session still holds
    assert worker.trainer.global_step == step
    assert worker.status().state == "running"                    # priority waits are not a pause
    release_inner.set()
    thread.join(TIMEOUT)
    wait_step(worker, step + 2)


def test_snapshot_model_is_a_consistent_eval_copy(worker, tokenizer_dir):
    worker.start(spec(tokenizer_dir, learning_rate=5e-3))
    assert worker.snapshot_model() is None or worker.status().state != "preparing"
    wait_step(worker, 2)
    with worker.priority():
        step = held_step(worker)
        model = worker.snapshot_model(max_age_s=0)
        live = worker.trainer.model
        assert model is not live and not model.training and live.training
        assert not any(p.requires_grad for p in model.parameters())
        assert all(p.requires_grad for p in live.parameters())
        theirs = live.state_dict()
        for name, tensor in model.state_dict().items():
            assert torch.equal(tensor, theirs[name]), name
        assert worker.snapshot_model(max_age_s=0) is model           # same step: the cached copy
        loaded = worker.snapshot()
        assert loaded.model is model and loaded.tokenizer is not None and f"step {step}" in loaded.source
        before = {k: v.clone() for k, v in model.state_dict().items()}
    wait_step(worker, step + 3)
    newer = worker.snapshot_model(max_age_s=0)
    assert newer is not model and not newer.training and worker.trainer.model.training
    assert any(not torch.equal(before[k], v) for k, v in newer.state_dict().items())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())   # the old copy never changes


# ---------------------------------------------------------------------------- failures
def test_preparation_failure_is_reported_and_worker_recovers(worker, tokenizer_dir):
    bad = spec(tokenizer_dir)
    bad.documents = [[], ["   "]]
    worker.start(bad)
    status = wait_state(worker, "failed", "finished", "diverged")
    assert status.state == "failed" and status.outcome == "failed"
    assert "corpus is empty" in status.message and "while preparing" in status.message
    assert status.error.startswith("ValueError: ") and "Traceback" not in status.message
    assert "Traceback" in status.traceback
    assert worker.snapshot_model() is None and worker.current_batch() is None

    with pytest.raises(ValueError, match="learning_rate"):        # invalid settings: refused at once
        worker.start(spec(tokenizer_dir, learning_rate=-1.0))
    with pytest.raises(ValueError, match="unknown preset"):
        worker.start(JobSpec(preset="huge", documents=documents()))

    worker.start(spec(tokenizer_dir, total_steps=3))
    assert wait_state(worker, "finished", "failed").outcome == "finished"


def test_crash_during_training_is_reported_and_a_new_run_works(worker, tokenizer_dir, monkeypatch):
    real_step = Trainer.step

    def flaky_step(self, *args, **kwargs):
        if self.global_step == 2:
            raise RuntimeError("boom in step 3")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "step", flaky_step)
    worker.start(spec(tokenizer_dir))
    status = wait_state(worker, "failed", "finished", "diverged")
    assert status.state == "failed" and status.step == 2
    assert status.error == "RuntimeError: boom in step 3"
    assert "at step 3" in status.message and "RuntimeError: boom in step 3" in status.message
    assert "flaky_step" in status.traceback and "Traceback" not in status.message
    _, old_index = worker.metrics_since(0)
    assert old_index == 2

    monkeypatch.setattr(Trainer, "step", real_step)
    worker.start(spec(tokenizer_dir, total_steps=5))
    status = wait_state(worker, "finished", "failed")
    assert status.outcome == "finished" and status.step == 5 and status.error is None
    records, index = worker.metrics_since(0)
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4, 5]


def test_nan_loss_ends_the_run_as_diverged_with_checkpoints_intact(worker, tokenizer_dir, monkeypatch):
    real_forward = BertWithHeads.forward
    calls = {"train": 0}

    def poisoned(self, *args, **kwargs):
        out = real_forward(self, *args, **kwargs)
        if self.training:
            calls["train"] += 1
            if calls["train"] >= 4 and out.mlm is not None and out.mlm.loss is not None:
                out.mlm.loss = out.mlm.loss * float("nan")
        return out

    monkeypatch.setattr(BertWithHeads, "forward", poisoned)
    worker.start(spec(tokenizer_dir, checkpoint_every=2))
    status = wait_state(worker, "diverged", "failed", "finished")
    assert status.state == "diverged" and status.outcome == "diverged", status
    assert "nan" in status.message and "step 4" in status.message and "step-000002" in status.message
    assert status.error.startswith("TrainingDiverged: ") and status.step == 3
    assert status.last_checkpoint.name == "step-000002" and is_complete(status.last_checkpoint)
    assert [c.step for c in worker.checkpoints()] == [2]
    assert [r["kind"] for r in worker.metrics_since(0)[0]][-1] == "diverged"
    monkeypatch.setattr(BertWithHeads, "forward", real_forward)
    worker.start(spec(tokenizer_dir, total_steps=2))
    assert wait_state(worker, "finished", "failed").outcome == "finished"


def test_resume_from_a_stopped_run_continues_it(worker, tokenizer_dir):
    first = worker.start(spec(tokenizer_dir, total_steps=8, checkpoint_every=0))
    wait_step(worker, 3)
    worker.stop(wait_s=TIMEOUT)
    stopped = worker.status()
    assert stopped.outcome == "stopped"
    resumed_spec = spec(tokenizer_dir)
    resumed_spec.training = {"total_steps": 8}
    resumed_spec.resume_from = str(first.run_dir)
    info = worker.start(resumed_spec)
    assert info.run_dir == first.run_dir
    status = wait_state(worker, "finished", "failed", "diverged")
    assert status.outcome == "finished" and status.step == 8, status
    steps = [r["step"] for r in worker.metrics_since(0)[0] if r["kind"] == "train"]
    assert steps == list(range(1, 9))                 # the history and the continuation, once each
    bad = spec(tokenizer_dir, batch_size=4)
    bad.resume_from = str(first.run_dir)               # batch_size etc. may not change on resume
    with pytest.raises(ValueError, match="cannot change batch_size when resuming"):
        worker.start(bad)

