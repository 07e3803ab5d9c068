"""A finished fine-tune saves its model in its base model's dtype: ``prepare_job`` sets ``final_dtype`` "auto" from
the start model's weights file (fp16 stays fp16, bf16 stays bf16, fp32 stays fp32), ``--final-dtype float32``
keeps fp32 (a resumed run may change it); the narrowed checkpoint loads in our loader, in ``transformers`` (its
logits equal ours) and as the start model of another fine-tune. The bundled model's 30-step fine-tune through ``python -m engine.finetune`` leaves a run
folder at most 1.2 times its weights file."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file

from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR, load_directory, save
from engine.finetune import build_parser, main, spec_from_args
from engine.model.heads import BertWithHeads
from engine.training.jobs.setup import prepare_job
from engine.training.loop.config import TrainingConfig
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.job_spec import JobSpec
from support.finetune_helpers import classification_rows, write_csv
from support.hf_checkpoints import assert_transformers_agrees
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[3]
SENTIMENT = ROOT / "assets" / "examples" / "sentiment.csv"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    """A tiny MLM+NSP base stored in each dtype, and 16 classification rows."""
    root = tmp_path_factory.mktemp("final-dtype")
    torch.manual_seed(0)
    base = BertWithHeads(tiny_config(vocab_size=tiny_tokenizer.vocab_size, max_position_embeddings=128),
                         heads=("mlm", "nsp"))
    bases = {name: save(base, tiny_tokenizer, root / name, dtype=getattr(torch, name))
             for name in ("float16", "bfloat16", "float32")}
    return {**bases, "csv": write_csv(root / "classes.csv", classification_rows(16)), "root": root}


def job(files: dict[str, Path], base: Path, run_dir: Path, **training) -> JobSpec:
    values = dict(task="classification", learning_rate=3e-3, warmup_steps=1, total_steps=6, batch_size=8,
                  max_seq_length=64, eval_every=0, eval_batches=0, checkpoint_every=0, checkpoint_every_s=0,
                  keep_optimizer_state="while-running")
    return JobSpec(TrainingConfig(**{**values, **training}), data=str(files["csv"]), eval_fraction=0.25,
                   init_from=str(base), run_dir=str(run_dir))


def weights_file(directory: Path) -> Path:
    return directory / "model.safetensors"


@pytest.mark.parametrize("stored", ["float16", "bfloat16", "float32"])
def test_auto_is_the_start_models_stored_dtype(files, tmp_path, stored):
    trainer = prepare_job(job(files, files[stored], tmp_path / "run")).trainer
    assert trainer.config.final_dtype == stored
    explicit = prepare_job(job(files, files[stored], tmp_path / "kept", final_dtype="float32")).trainer
    assert explicit.config.final_dtype == "float32"                     # the option wins over the base's


def test_a_fine_tune_of_a_float16_base_ends_float16_loads_everywhere_and_fine_tunes_again(files, tmp_path):
    trainer = prepare_job(job(files, files["float16"], tmp_path / "run")).trainer
    assert trainer.train().status == "finished"
    last = RunFolder(trainer.run_dir).checkpoints()[0].path
    stored, trained = load_file(weights_file(last)), trainer.model.state_dict()
    assert {v.dtype for v in stored.values()} == {torch.float16}
    assert all(torch.equal(value, trained[key].to(torch.float16)) for key, value in stored.items())
    assert weights_file(last).stat().st_size <= 1.2 * weights_file(files["float16"]).stat().st_size
    batch = trainer.eval_data.batch(0, 0)
    assert_transformers_agrees(last, transformers.BertForSequenceClassification, batch, "classifier")   # 1e-5
    again = prepare_job(job(files, last, tmp_path / "again", total_steps=2)).trainer     # "fine-tune again from it"
    assert again.config.final_dtype == "float16" and again.train().status == "finished"
    assert {v.dtype for v in load_file(weights_file(RunFolder(again.run_dir).checkpoints()[0].path)).values()} == {
        torch.float16}


def test_keeping_float32_gives_the_trained_weights_unrounded(files, tmp_path):
    trainer = prepare_job(job(files, files["float16"], tmp_path / "run", final_dtype="float32")).trainer
    trainer.train()
    last = RunFolder(trainer.run_dir).checkpoints()[0].path
    trained = trainer.model.state_dict()
    assert all(value.dtype == torch.float32 and torch.equal(value, trained[key])
               for key, value in load_file(weights_file(last)).items())
    assert load_directory(last).heads == ("mlm", "nsp", "classifier")


def test_the_flag_sets_final_dtype_and_a_bad_value_exits_2(files, tmp_path, capsys):
    parser = build_parser()
    base = ["--task", "classification", "--data", str(files["csv"]), "--init-from", str(files["float16"])]
    for extra, expected in (([], "auto"), (["--final-dtype", "float32"], "float32"),
                            (["--final-dtype", "bfloat16"], "bfloat16")):
        spec = spec_from_args(parser.parse_args(base + extra), parser)
        assert spec.training_config().final_dtype == expected
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(base + ["--final-dtype", "fp8"])
    assert exited.value.code == 2 and "--final-dtype: invalid choice: 'fp8'" in capsys.readouterr().err
    stopped = prepare_job(job(files, files["float16"], tmp_path / "run")).trainer     # interrupted at step 2
    stopped.train(num_steps=2)
    stopped.save_checkpoint()
    resumed = spec_from_args(parser.parse_args(["--resume", str(tmp_path / "run"), "--final-dtype", "float32"]), parser)
    trainer = prepare_job(resumed).trainer                      # a resumed run may change it (it changes no step)
    assert (trainer.global_step, trainer.config.final_dtype) == (2, "float32") and trainer.train().status == "finished"
    last = RunFolder(trainer.run_dir).checkpoints()[0].path
    assert {v.dtype for v in load_file(weights_file(last)).values()} == {torch.float32}


def test_cli_a_30_step_fine_tune_of_the_default_model_keeps_its_run_folder_near_its_weights(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["--task", "classification", "--data", str(SENTIMENT), "--steps", "30", "--batch-size", "4",
                 "--seq-len", "32", "--eval-fraction", "0.2", "--eval-every", "0", "--eval-batches", "1",
                 "--run-dir", str(run_dir), "--threads", "1", "--no-progress"])
    assert code == 0, capsys.readouterr().err[-2000:]
    base = weights_file(DEFAULT_MODEL_DIR).stat().st_size
    folder = sum(path.stat().st_size for path in run_dir.rglob("*") if path.is_file())
    assert folder <= 1.2 * base, (folder, base)
    last = RunFolder(run_dir).checkpoints()[0].path
    assert {v.dtype for v in load_file(weights_file(last)).values()} == {torch.float16}
    assert load_directory(last).config.id2label == {0: "negative", 1: "positive"}
