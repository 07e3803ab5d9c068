"""``TrainingConfig.final_dtype``: a run's last checkpoint that keeps only the model (``keep_optimizer_state=
"while-running"``) stores its weights in that dtype, the trained float32 ones rounded; every checkpoint that can
resume keeps float32 weights, so an interrupted run still resumes bit for bit and ends with the same file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from engine.model.heads import BertWithHeads
from engine.training.loop.config import TrainingConfig, final_dtype_of
from engine.training.loop.resume import resume
from engine.training.loop.trainer import Trainer
from engine.training.runs.resume_rules import RESUMABLE_FIELDS
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import has_optimizer_state, read_training_state
from engine.training.tasks import task_for
from engine.training.tasks.pretraining import build_datasets
from tests.conftest import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")


def documents(n_docs: int = 12) -> list[list[str]]:
    words = sorted(WORDS)
    return [[" ".join(words[(d * 7 + s * 5 + j) % len(words)] for j in range(6)) + "." for s in range(6)]
            for d in range(n_docs)]


def config(**overrides) -> TrainingConfig:
    values = dict(learning_rate=2e-3, warmup_steps=2, total_steps=12, batch_size=8, max_seq_length=32, eval_every=0,
                  checkpoint_every=3, checkpoint_every_s=0, seed=0, keep_optimizer_state="while-running",
                  final_dtype="float16")
    return TrainingConfig(**{**values, **overrides})


def data(tokenizer, cfg: TrainingConfig):
    docs = documents()
    return build_datasets(docs[:-3], docs[-3:], tokenizer, cfg)


def trainer(run_dir: Path, tokenizer, make_config, cfg: TrainingConfig) -> Trainer:
    torch.manual_seed(0)
    return Trainer(BertWithHeads(make_config()), tokenizer, *data(tokenizer, cfg), cfg, run_dir, task=task_for(cfg))


def weights(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(RunFolder(run_dir).checkpoint_dir(step) / "model.safetensors")


def dtypes(run_dir: Path) -> dict[int, set[torch.dtype]]:
    return {c.step: {v.dtype for v in weights(run_dir, c.step).values()} for c in RunFolder(run_dir).checkpoints()}


def test_the_field_is_checked_resumable_and_auto_by_default() -> None:
    assert TrainingConfig().final_dtype == "auto" and "final_dtype" in RESUMABLE_FIELDS
    older = {k: v for k, v in config().to_dict().items() if k != "final_dtype"}     # a run written before it
    assert TrainingConfig.from_dict(older).final_weights_dtype() == torch.float32
    assert [config(final_dtype=name).final_weights_dtype() for name in ("float16", "bfloat16", "float32")] == [
        torch.float16, torch.bfloat16, torch.float32]
    with pytest.raises(ValueError, match="final_dtype must be one of auto, float16, bfloat16, float32, got 'fp8'"):
        config(final_dtype="fp8")
    assert [final_dtype_of(d) for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64, None)] == [
        "float16", "bfloat16", "float32", "float32", "float32"]


def test_only_the_last_model_only_checkpoint_is_narrowed_and_a_resume_ends_with_the_same_file(
        tmp_path, tiny_tokenizer, make_config):
    straight = trainer(tmp_path / "straight", tiny_tokenizer, make_config, config())
    straight.train()
    assert dtypes(straight.run_dir) == {12: {torch.float16}, 9: {torch.float32}, 6: {torch.float32},
                                        3: {torch.float32}}
    trained = straight.model.state_dict()
    last = weights(straight.run_dir, 12)
    assert last.keys() <= trained.keys()
    assert all(torch.equal(value, trained[key].to(torch.float16)) for key, value in last.items())   # rounded
    saved = json.loads((RunFolder(straight.run_dir).checkpoint_dir(12) / "config.json").read_text())
    assert saved["dtype"] == "float32"                          # transformers computes in fp32, as our loader
    assert read_training_state(RunFolder(straight.run_dir).checkpoint_dir(12))["config"]["final_dtype"] == "float16"

    chunks = trainer(tmp_path / "chunks", tiny_tokenizer, make_config, config())
    chunks.train(num_steps=9)                                   # interrupted: the newest can resume, in float32
    newest = RunFolder(chunks.run_dir).checkpoint_dir(9)
    assert has_optimizer_state(read_training_state(newest))
    live = chunks.model.state_dict()
    assert all(torch.equal(value, live[key]) for key, value in weights(chunks.run_dir, 9).items())
    resumed = resume(chunks.run_dir, task_for(config()), *data(tiny_tokenizer, config()))
    resumed.train()
    again = weights(chunks.run_dir, 12)
    assert again.keys() == last.keys() and all(torch.equal(again[k], last[k]) for k in last)


def test_a_resumable_last_checkpoint_and_the_float32_option_keep_float32(tmp_path, tiny_tokenizer, make_config):
    newest = trainer(tmp_path / "newest", tiny_tokenizer, make_config, config(keep_optimizer_state="newest"))
    newest.train()                                              # its last checkpoint can resume: exact weights
    assert has_optimizer_state(read_training_state(RunFolder(newest.run_dir).checkpoint_dir(12)))
    kept = trainer(tmp_path / "kept", tiny_tokenizer, make_config, config(final_dtype="float32"))
    kept.train()
    for run in (newest, kept):
        assert set().union(*dtypes(run.run_dir).values()) == {torch.float32}
        assert "dtype" not in json.loads((RunFolder(run.run_dir).checkpoint_dir(12) / "config.json").read_text())
    live = kept.model.state_dict()
    assert all(torch.equal(value, live[key]) for key, value in weights(kept.run_dir, 12).items())
