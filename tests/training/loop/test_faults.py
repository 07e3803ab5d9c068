"""Faults: SIGKILL during checkpoint writes (20 times), NaN loss, an exception in the worker,
a full disk or read-only data folder — the app says so clearly, keeps serving, and every
checkpoint on disk stays loadable.

The kill test drives ``tests/support/fault_child.py``: one process imports torch once and forks a
trainer per kill, which writes a checkpoint after every step; each is killed at a named
moment of a checkpoint write (held there by a hook) or at a random moment after its
staging folder appears. After each kill the disk is checked and the next trainer resumes.
"""
from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from engine.checkpoints.hf_format import load_directory
from engine.training.runs.state import read_metrics, read_training_state
from engine.training.runs.run_folder import RunFolder
from tests.conftest import VOCAB, WORDS, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")

CHILD = Path(__file__).resolve().parents[2] / "support" / "fault_child.py"
STEP_DIR = re.compile(r"^step-\d{6}$")
WAIT_S = 120.0            # only a hang guard: each line normally arrives within a second
# (phase, checkpoints to complete first): 12 named moments of a write + 8 random ones = 20 kills.
PLAN = [("mkdtemp", 0), ("poll", 1), ("weights-torn", 1), ("poll", 1), ("weights", 1), ("config", 1),
        ("poll", 1), ("tokenizer", 1), ("state-torn", 1), ("poll", 1), ("unsynced", 1), ("synced", 1),
        ("poll", 1), ("renamed", 1), ("swap", 0), ("poll", 1), ("swapped", 0), ("prune", 1), ("poll", 1),
        ("poll", 1)]
STAGED = {"mkdtemp", "weights-torn", "weights", "config", "tokenizer", "state-torn", "unsynced", "synced"}


class Zygote:
    """``fault_child.py`` as a subprocess: send it JSON commands, read its lines."""

    def __init__(self, setup: Path, log: Path) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        self.stderr = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, str(CHILD), str(setup)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("eof")

    def send(self, **command) -> None:
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def until(self, prefix: str) -> list[str]:
        """Every line up to and including the first starting with ``prefix``."""
        seen = []
        while True:
            try:
                line = self.lines.get(timeout=WAIT_S)
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} line; got {seen}; stderr: {self.stderr.name}") from None
            seen.append(line)
            assert not line.startswith(("error", "eof")), f"the trainer failed: {seen}"
            if line.startswith(prefix):
                return seen

    def close(self, child: int | None = None) -> None:
        if child is not None:                                # a test failed while a trainer was held
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.stdin.close()
        self.proc.wait(timeout=WAIT_S)
        self.stderr.close()


def documents(n_docs: int = 14, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    return [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + "." for _ in range(6)]
            for _ in range(n_docs)]


def write_setup(tmp_path: Path) -> Path:
    from engine.text.tokenizer import WordPieceTokenizer

    WordPieceTokenizer.from_vocab({tok: i for i, tok in enumerate(VOCAB)}).save(tmp_path / "tokenizer")
    config = tiny_config()
    model = {k: getattr(config, k) for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                                              "num_attention_heads", "intermediate_size", "max_position_embeddings")}
    training = dict(learning_rate=2e-3, warmup_steps=5, total_steps=1000, batch_size=4, max_seq_length=32,
                    eval_every=0, checkpoint_every=1, keep_last_checkpoints=3, log_every=1, seed=0,
                    keep_optimizer_state="all")   # every checkpoint resumable: the kills resume from older ones
    setup = dict(tokenizer_dir=str(tmp_path / "tokenizer"), run_dir=str(tmp_path / "run"), model=model,
                 training=training, documents=documents())
    path = tmp_path / "setup.json"
    path.write_text(json.dumps(setup))
    return path


def check_disk(run_dir: Path, verified: dict) -> list[int]:
    """Recover, then: only complete step dirs remain, all listed, each loading in full. The listed steps."""
    listed = RunFolder(run_dir).checkpoints()                       # cleans up what a killed writer left
    names = sorted(os.listdir(run_dir / "checkpoints"))
    assert all(STEP_DIR.match(n) for n in names), f"left behind: {names}"
    assert sorted(c.path.name for c in listed) == names, "a checkpoint folder on disk is not listed (incomplete)"
    for info in listed:
        stamp = tuple((p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(info.path.iterdir()))
        if verified.get(info.path) == stamp:
            continue                                         # this exact folder was checked after an earlier kill
        loaded = load_directory(info.path)                   # HF layout: config.json, safetensors, tokenizer
        assert loaded.heads == ("mlm", "nsp") and loaded.tokenizer is not None
        state = read_training_state(info.path)               # optimizer, scheduler, RNG, data position
        assert state["step"] == info.step and state["scheduler"]["last_epoch"] == info.step
        assert state["optimizer"]["state"] and {"python", "torch"} <= set(state["rng"])
        verified[info.path] = stamp
    return [c.step for c in listed]


def test_sigkill_during_checkpoint_writes_20_times(tmp_path: Path) -> None:
    setup = write_setup(tmp_path)
    run_dir = tmp_path / "run"
    zygote = Zygote(setup, tmp_path / "child-stderr.txt")
    rng, verified, steps, kinds = random.Random(0), {}, [], []
    pid, began = None, time.monotonic()
    try:
        zygote.until("ready")
        for phase, arm_after in PLAN:
            command: dict = dict(phase=phase if phase != "poll" else "announce", arm_after=arm_after)
            if phase in ("swap", "swapped"):                  # resume from the second newest: overwrite the newest
                assert len(steps) >= 2, steps
                command["resume_from"] = str(run_dir / "checkpoints" / f"step-{steps[1]:06d}")
            zygote.send(**command)
            pid = int(zygote.until("child")[-1].split()[1])
            first = zygote.until("train")
            start = int(first[-2].split()[1]) if first[-2].startswith("resumed") else 0
            expected = 0 if not steps else (steps[1] if "resume_from" in command else steps[0])
            assert start == expected and first[-1].split()[1] == str(start + 1), (phase, first, steps)
            if phase == "poll":                               # a random moment from a staging folder's birth on
                zygote.until("staging")
                time.sleep(rng.uniform(0, 0.1))
            else:
                zygote.until(f"frozen {phase}")
            os.kill(pid, signal.SIGKILL)
            status = int(zygote.until(f"exited {pid}")[-1].split()[2])
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            hidden = [n for n in os.listdir(run_dir / "checkpoints") if not STEP_DIR.match(n)]
            kinds.append((phase, hidden))
            if phase in STAGED:
                assert any(f".tmp-{pid}-" in n for n in hidden), (phase, hidden)
            elif phase in ("swap", "swapped", "prune"):
                mark = ".del-" if phase == "prune" else ".old-"
                assert any(mark in n for n in hidden), (phase, hidden)
            newest_before = steps[0] if steps else None
            steps = check_disk(run_dir, verified)
            print(f"{time.monotonic() - began:6.1f}s kill {len(kinds):2d} at {phase:12s} left {hidden}; on disk {steps}")
            if phase == "swap":                               # the replaced checkpoint was put back
                assert steps[0] == newest_before
        assert len(kinds) == 20 and steps[0] >= 15, steps
        # The last trainer resumes from the newest and finishes cleanly; every step was logged once.
        zygote.send(phase="none", steps=3)
        lines = zygote.until("done")
        assert f"resumed {steps[0]}" in lines and lines[-1] == f"done {steps[0] + 3}"
        final = steps[0] + 3
        logged = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
        assert [r["step"] for r in logged] == list(range(1, final + 1))
        # ... and the losses are those of one uninterrupted run: every resume was exact.
        zygote.send(phase="none", steps=final, run_dir=str(tmp_path / "reference"))
        zygote.until("done")
        reference = [r for r in read_metrics(tmp_path / "reference" / "metrics.jsonl") if r["kind"] == "train"]
        assert [r["step"] for r in reference] == list(range(1, final + 1))
        # (to float rounding: a reduction's order may follow memory alignment, which differs between processes)
        assert [r["loss"] for r in logged] == pytest.approx([r["loss"] for r in reference], rel=1e-5, abs=0)
        assert check_disk(run_dir, verified)[0] == final
        ours = load_directory(run_dir / "checkpoints" / f"step-{final:06d}").model.state_dict()
        theirs = load_directory(tmp_path / "reference" / "checkpoints" / f"step-{final:06d}").model.state_dict()
        for name, tensor in theirs.items():
            torch.testing.assert_close(ours[name], tensor, rtol=1e-5, atol=1e-6, msg=name)
    finally:
        zygote.close(pid)
    print(f"\n20 SIGKILLs survived; {sum(bool(h) for _, h in kinds)} left a partial write behind; "
          f"resumed to step {final}")


# ---------------------------------------------------------------------------- through the app
FAST = ["tiny", "shakespeare", 30, 300, 32, 8, 5e-4, 500, 0.15, False, True]   # 500 steps: ends only when told
APP_WAIT_S = 120.0                                                               # hang guard only


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory):
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from explorer.services import default_services

    svc = default_services(runs_root=tmp_path_factory.mktemp("runs"))
    yield svc
    svc.get_worker().close(timeout_s=30)


@pytest.fixture(scope="module")
def client(services):
    import app
    from support.app_helpers import serve

    with serve(app.create_app(services)) as running:
        yield running


def status_text(client) -> str:
    return client.predict(api_name="/train_status")[0]


def wait_status(client, *states: str) -> str:
    deadline = time.monotonic() + APP_WAIT_S
    while not (text := status_text(client)).startswith(tuple(f"**{s}**" for s in states)):
        assert time.monotonic() < deadline, f"never reached {states}: {text}"
        time.sleep(0.3)
    return text


def wait_step(services, step: int) -> None:
    deadline = time.monotonic() + APP_WAIT_S
    while (status := services.get_worker().status()).step < step:
        assert status.active and time.monotonic() < deadline, f"the run ended before step {step}: {status}"
        time.sleep(0.1)


def assert_serving(client) -> None:
    """A probing call still works: the app survived the fault."""
    _, results, *_ = client.predict("default", "the cat sat on the [MASK] .", 3, "", api_name="/fill_mask")
    assert results and results[0]


def files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def first_checkpoint(client, services) -> Path:
    """Start a run, let it take two steps and save one checkpoint through the UI; its folder."""
    client.predict(*FAST, api_name="/train_start")
    wait_step(services, 2)
    note = client.predict(api_name="/train_save")
    path = services.get_worker().status().last_checkpoint
    assert note.startswith(f"Saved `{path.name}`") and files(path)
    return path


def unwritable(folder: Path, monkeypatch, errno_: int) -> None:
    """Make creating anything in ``folder`` fail: chmod where that works, else (root) OSError(errno_)."""
    import pathlib
    import tempfile

    folder.chmod(0o555)
    try:
        (folder / ".probe").mkdir()
    except PermissionError:
        return                                               # a plain user: the real thing
    (folder / ".probe").rmdir()
    folder.chmod(0o755)                                      # root ignores modes: simulate the error instead
    error = OSError(errno_, os.strerror(errno_))
    real_mkdir, real_mkdtemp = pathlib.Path.mkdir, tempfile.mkdtemp

    def mkdir(self, *args, **kwargs):
        if self.parent == folder and not self.exists():
            raise OSError(errno_, os.strerror(errno_), str(self))
        return real_mkdir(self, *args, **kwargs)

    def mkdtemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == folder:
            raise error
        return real_mkdtemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)


def test_exception_in_the_worker_is_shown_and_the_app_keeps_serving(client, services, monkeypatch) -> None:
    from engine.training.loop.trainer import Trainer

    real_step = Trainer.step

    def flaky_step(self, *args, **kwargs):
        if self.global_step == 2:
            raise RuntimeError("boom (injected into step 3)")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "step", flaky_step)
    client.predict(*FAST, api_name="/train_start")
    text = wait_status(client, "failed", "finished", "diverged")
    assert text.startswith("**failed** · step **2 / 500**"), text
    assert "boom (injected into step 3)" in text and "at step 3" in text and "Traceback" not in text
    assert_serving(client)
    monkeypatch.undo()
    client.predict(*FAST, api_name="/train_start")           # the worker takes a new run
    wait_step(services, 1)
    client.predict(api_name="/train_stop")
    assert wait_status(client, "stopped", "finished", "failed").startswith("**stopped**")


def test_nan_loss_stops_the_run_and_keeps_the_last_checkpoint(client, services, monkeypatch) -> None:
    from engine.model.heads import BertWithHeads

    saved = first_checkpoint(client, services)
    before = files(saved)
    real_forward = BertWithHeads.forward

    def poisoned(self, *args, **kwargs):
        out = real_forward(self, *args, **kwargs)
        if self.training and out.mlm is not None and out.mlm.loss is not None:
            out.mlm.loss = out.mlm.loss * float("nan")
        return out

    monkeypatch.setattr(BertWithHeads, "forward", poisoned)
    text = wait_status(client, "diverged", "failed", "finished")
    assert text.startswith("**diverged**") and "nan" in text, text
    assert f"the last good checkpoint is {saved.name}" in text and "Traceback" not in text
    monkeypatch.undo()
    assert files(saved) == before and saved in [c.path for c in services.get_worker().checkpoints()]
    assert read_training_state(saved)["step"] == int(saved.name.split("-")[1])
    assert all(torch.isfinite(p).all() for p in load_directory(saved).model.parameters())
    assert_serving(client)


def test_read_only_runs_folder_refuses_to_start_with_a_clear_message(client, services, monkeypatch) -> None:
    from gradio_client.exceptions import AppError

    import errno

    root = services.get_worker().runs_root
    before = sorted(os.listdir(root))
    unwritable(root, monkeypatch, errno.EROFS)
    try:
        with pytest.raises(AppError, match="The folder …/runs[^ ]* (is on a read-only file system|is not writable "
                                           r"\(permission denied\)) while creating the run folder pretraining-"):
            client.predict(*FAST, api_name="/train_start")
    finally:
        root.chmod(0o755)
    assert sorted(os.listdir(root)) == before and not services.get_worker().status().active
    assert_serving(client)


@pytest.mark.parametrize("fault", ["disk full", "read-only"])
def test_checkpoint_into_a_full_or_read_only_folder(client, services, monkeypatch, fault: str) -> None:
    import errno

    from gradio_client.exceptions import AppError

    from engine.checkpoints import hf_format as checkpoints

    saved = first_checkpoint(client, services)
    before, folder = files(saved), saved.parent
    if fault == "disk full":                                 # half a file lands, then the disk is full
        def full(tensors, filename, *args, **kwargs):
            Path(filename).write_bytes(b"\0" * 1000)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)
        monkeypatch.setattr(checkpoints, "save_file", full)
        reason = r"The disk holding …/[^ ]+ is full \(no space left on device\)"
    else:
        unwritable(folder, monkeypatch, errno.EROFS)
        reason = r"The folder …/[^ ]+ (is on a read-only file system|is not writable \(permission denied\))"
    try:
        with pytest.raises(AppError, match=f"{reason} while writing the checkpoint of step \\d+; the last good "
                                           f"checkpoint, step \\d+, is kept"):
            client.predict(api_name="/train_save")
        step = services.get_worker().status().step
        wait_step(services, step + 2)                        # a failed "save now" does not end the run
        assert status_text(client).startswith("**running**")
        client.predict(api_name="/train_stop")               # its final checkpoint cannot be written either
        text = wait_status(client, "failed", "stopped", "finished")
    finally:
        folder.chmod(0o755)
    assert text.startswith("**failed**") and re.search(f"{reason} while writing the checkpoint of step", text), text
    assert f"the last good checkpoint, step {int(saved.name.split('-')[1])}, is kept" in text
    assert "Continue a run" in text and "Traceback" not in text
    monkeypatch.undo()
    assert sorted(os.listdir(folder)) == [saved.name]        # no staging folder left behind
    assert files(saved) == before and load_directory(saved).tokenizer is not None
    assert_serving(client)
