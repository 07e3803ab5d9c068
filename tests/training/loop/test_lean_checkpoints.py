"""Lean runs (``TrainingConfig.keep_optimizer_state``): only a run's newest checkpoint keeps the optimizer and
scheduler state; the older ones stay complete, listed, loadable and start models, and resuming from one is
refused with a sentence. ``while-running`` does the same until the run finishes, then its last checkpoint keeps
only the model (continuing it is refused with one sentence; an interrupted run still resumes bit for bit).
``all`` keeps every checkpoint's."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from engine.checkpoints.hf_format import load_directory
from engine.model.heads import BertWithHeads
from engine.training.loop.config import TrainingConfig
from engine.training.loop.resume import resume
from engine.training.loop.trainer import Trainer
from engine.training.runs.resume_rules import RESUMABLE_FIELDS
from engine.training.runs.run_catalog import summarize
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import (STATE_FILE, drop_optimizer_state, finished_lean_refusal, has_optimizer_state,
                                        is_finished_lean, read_training_state)
from engine.training.tasks import task_for
from engine.training.tasks.pretraining import build_datasets
from tests.conftest import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")


def documents(n_docs: int = 12) -> list[list[str]]:
    words = sorted(WORDS)
    return [[" ".join(words[(d * 7 + s * 5 + j) % len(words)] for j in range(6)) + "." for s in range(6)]
            for d in range(n_docs)]


def config(**overrides) -> TrainingConfig:
    values = dict(learning_rate=2e-3, warmup_steps=2, total_steps=12, batch_size=8, max_seq_length=32,
                  eval_every=0, checkpoint_every=3, checkpoint_every_s=0, seed=0)
    return TrainingConfig(**{**values, **overrides})


def trainer(run_dir: Path, tokenizer, make_config, cfg: TrainingConfig) -> Trainer:
    docs = documents()
    train, held_out = build_datasets(docs[:-3], docs[-3:], tokenizer, cfg)
    torch.manual_seed(0)
    return Trainer(BertWithHeads(make_config()), tokenizer, train, held_out, cfg, run_dir, task=task_for(cfg))


def build_pair(tokenizer):
    docs = documents()
    return build_datasets(docs[:-3], docs[-3:], tokenizer, config())


def state_sizes(run_dir: Path) -> dict[int, int]:
    return {c.step: (c.path / STATE_FILE).stat().st_size for c in RunFolder(run_dir).checkpoints()}


def test_the_field_is_resumable_checked_and_defaults_to_newest() -> None:
    assert TrainingConfig().keep_optimizer_state == "newest" and "keep_optimizer_state" in RESUMABLE_FIELDS
    older = {k: v for k, v in config().to_dict().items() if k != "keep_optimizer_state"}
    assert TrainingConfig.from_dict(older).keep_optimizer_state == "newest"
    with pytest.raises(ValueError, match="keep_optimizer_state must be one of newest, while-running, all, got 'some'"):
        config(keep_optimizer_state="some")


def test_only_the_newest_keeps_optimizer_state_and_the_run_resumes_bit_for_bit(tmp_path, tiny_tokenizer,
                                                                               make_config):
    first = trainer(tmp_path / "first", tiny_tokenizer, make_config, config())
    first.train(num_steps=9)
    run = RunFolder(first.run_dir)
    assert [c.step for c in run.checkpoints()] == [9, 6, 3]                   # every one listed
    states = {c.step: read_training_state(c.path) for c in run.checkpoints()}
    assert [s for s, state in states.items() if has_optimizer_state(state)] == [9]
    assert states[3]["step"] == 3 and states[3]["rng"] and states[3]["data_fingerprint"]   # the rest stays
    sizes = state_sizes(first.run_dir)
    assert sizes[3] == sizes[6] and sizes[3] * 4 < sizes[9]
    assert load_directory(run.checkpoint_dir(3)).model is not None          # still a model
    shutil.copytree(first.run_dir, tmp_path / "copy")
    first.train()

    with pytest.raises(ValueError, match="step-000006 keeps no optimizer state .* resume from the run's newest"):
        resume(tmp_path / "copy" / "checkpoints" / "step-000006", task_for(config()), *build_pair(tiny_tokenizer))
    resumed = resume(tmp_path / "copy", task_for(config()), *build_pair(tiny_tokenizer))   # its newest: step 9
    assert resumed.global_step == 9
    resumed.train()
    ours = load_directory(resumed.run_dir / "checkpoints" / "step-000012").model.state_dict()
    theirs = load_directory(first.run_dir / "checkpoints" / "step-000012").model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    assert [s for s, size in state_sizes(resumed.run_dir).items() if size > sizes[3]] == [12]


def test_all_keeps_every_checkpoints_optimizer_state_to_the_end(tmp_path, tiny_tokenizer, make_config):
    trainer(tmp_path / "run", tiny_tokenizer, make_config, config(keep_optimizer_state="all")).train()
    found = RunFolder(tmp_path / "run").checkpoints()
    assert [c.step for c in found] == [12, 9, 6, 3]
    assert all(has_optimizer_state(read_training_state(c.path)) for c in found)
    assert resume(tmp_path / "run", task_for(config()), *build_pair(tiny_tokenizer), total_steps=13).global_step == 12


def test_while_running_resumes_bit_for_bit_until_the_run_finishes_then_keeps_only_the_model(tmp_path, tiny_tokenizer,
                                                                                           make_config):
    """Interrupted at step 9 the newest checkpoint is resumable and the resumed run ends with the straight run's
    weights; a finished run keeps no optimizer state anywhere, and continuing it is refused with the sentence."""
    lean = config(keep_optimizer_state="while-running")
    straight = trainer(tmp_path / "straight", tiny_tokenizer, make_config, lean)
    straight.train()
    run = RunFolder(straight.run_dir)
    assert [c.step for c in run.checkpoints()] == [12, 9, 6, 3]
    states = {c.step: read_training_state(c.path) for c in run.checkpoints()}
    assert not any(has_optimizer_state(state) for state in states.values())
    assert [s for s, state in states.items() if is_finished_lean(state)] == [12]   # the others: older checkpoints
    assert states[12]["step"] == 12 and states[12]["rng"] and states[12]["data_fingerprint"]
    last = run.checkpoint_dir(12)
    sentence = finished_lean_refusal("straight", "step-000012")
    for source in (straight.run_dir, last):
        with pytest.raises(ValueError) as refused:
            resume(source, task_for(lean), *build_pair(tiny_tokenizer), total_steps=20)
        assert str(refused.value) == sentence
    assert sentence.startswith("the run straight finished and kept only the model in its last checkpoint, "
                               "step-000012, not the optimizer state") and "start a new fine-tune from" in sentence
    summary = summarize(run)                             # the run lists say so, and Continue does not offer it
    assert summary.finished_lean and not summary.resumable and "finished, model only" in summary.label
    assert [c.ends_lean for c in run.checkpoints()] == [True, False, False, False]

    interrupted = trainer(tmp_path / "chunks", tiny_tokenizer, make_config, lean)
    interrupted.train(num_steps=9)                       # not finished: the newest keeps what a resume needs
    sizes = state_sizes(interrupted.run_dir)
    assert [s for s, size in sizes.items() if size > 4 * sizes[3]] == [9]
    assert state_sizes(straight.run_dir)[12] * 4 < sizes[9]    # the finished one: no optimizer state
    resumed = resume(tmp_path / "chunks", task_for(lean), *build_pair(tiny_tokenizer))
    assert resumed.global_step == 9
    resumed.train()
    ours = load_directory(resumed.run_dir / "checkpoints" / "step-000012").model.state_dict()
    theirs = load_directory(last).model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    assert is_finished_lean(read_training_state(resumed.run_dir / "checkpoints" / "step-000012"))


def test_dropping_is_atomic_cleans_up_a_killed_rewrite_and_is_done_once(tmp_path, tiny_tokenizer, make_config):
    trainer(tmp_path / "run", tiny_tokenizer, make_config, config(keep_optimizer_state="all")).train(num_steps=3)
    checkpoint = RunFolder(tmp_path / "run").checkpoint_dir(3)
    (checkpoint / f".{STATE_FILE}.tmp-killed").write_bytes(b"torn")       # a rewrite killed before os.replace
    assert drop_optimizer_state(checkpoint) and not drop_optimizer_state(checkpoint)
    assert sorted(p.name for p in checkpoint.iterdir() if p.name.startswith(".")) == []   # no temp file left
    assert not has_optimizer_state(read_training_state(checkpoint))
