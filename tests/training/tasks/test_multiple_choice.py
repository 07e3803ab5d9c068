"""Multiple choice through the shared Trainer: one step's loss equals BertForMultipleChoice's, accumulation
equals one big batch; a job learns from a CSV, exports to transformers, builds next-sentence choices
from documents, refuses bad files with the line, and runs under torchrun with 2 gloo processes."""
from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
import torch
import transformers

from support.cli_helpers import torchrun
from engine.checkpoints.hf_format import load_directory
from engine.data.multiple_choice import build_choice_dataset, read_choice_file
from engine.finetune import main
from engine.model.heads import BertWithHeads
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import prepare_job
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import read_metrics
from engine.training.tasks import task_for
from engine.training.loop.trainer import Trainer
from support.reference import hf_copy
from support.finetune_helpers import FILLER, NAMES, save_tiny_model
from support.hf_checkpoints import assert_transformers_agrees

pytestmark = pytest.mark.usefixtures("one_thread")


def choice_csv(path: Path, count: int, seed: int = 0) -> Path:
    """The right choice names the thing the context names; the 3 others name other things."""
    rng = random.Random(seed)
    lines = ["context,choice0,choice1,choice2,choice3,label"]
    for _ in range(count):
        names = rng.sample(NAMES, 4)
        context = " ".join(rng.sample(FILLER, 2) + [f"the {names[0]}"])
        choices = [f"{rng.choice(FILLER)} {name}" for name in names]
        label = rng.randrange(4)
        choices.insert(label, choices.pop(0))
        lines.append(",".join([context, *choices, str(label)]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("choices")
    return {"model": save_tiny_model(root / "model", tiny_tokenizer), "csv": choice_csv(root / "mc.csv", 240),
            "root": root}


def config(**overrides) -> TrainingConfig:
    values = dict(task="multiple_choice", learning_rate=3e-3, warmup_steps=3, total_steps=60, batch_size=8,
                  max_seq_length=32, eval_every=30, eval_batches=0, checkpoint_every=0)
    values.update(overrides)
    return TrainingConfig(**values)


def test_one_step_loss_equals_transformers_and_accumulation_equals_one_batch(files, tiny_tokenizer, make_config,
                                                                             tmp_path):
    examples = read_choice_file(files["csv"])
    data = build_choice_dataset(examples, tiny_tokenizer, 32, 8)
    torch.manual_seed(0)
    model = BertWithHeads(make_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                          heads=("multiple_choice",))
    batch = data.collate(list(range(7)))
    assert batch.input_ids.dim() == 3 and batch.input_ids.shape[:2] == (7, 4)
    theirs = hf_copy(model, transformers.BertForMultipleChoice)
    with torch.no_grad():
        reference = theirs(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                           token_type_ids=batch.token_type_ids, labels=batch.choice_labels)
    big = Trainer(copy.deepcopy(model), None, data, None, config(warmup_steps=0), tmp_path / "a",
                  task=task_for(config(warmup_steps=0)))
    one = big.step([batch])
    assert one["multiple_choice_loss"] == pytest.approx(reference.loss.item(), abs=1e-5)
    right = (reference.logits.argmax(-1) == batch.choice_labels).float().mean().item()
    assert one["accuracy"] == pytest.approx(right)
    small_data = build_choice_dataset(examples, tiny_tokenizer, 32, 4)
    small = Trainer(copy.deepcopy(model), None, small_data, None,
                    config(warmup_steps=0, batch_size=4, gradient_accumulation_steps=2), tmp_path / "b",
                    task=task_for(config(warmup_steps=0, batch_size=4, gradient_accumulation_steps=2)))
    two = small.step([small_data.collate([0, 1, 2]), small_data.collate([3, 4, 5, 6])])
    for key in ("multiple_choice_loss", "accuracy", "loss", "grad_norm"):
        assert two[key] == pytest.approx(one[key], abs=1e-6), key
    ours = dict(small.model.named_parameters())
    for name, param in big.model.named_parameters():
        if name != "multiple_choice.bias":   # a shift of every choice's score: its gradient is 0 up to rounding
            torch.testing.assert_close(ours[name], param, rtol=0, atol=1e-6, msg=name)


@pytest.mark.slow
def test_a_csv_job_learns_and_loads_in_transformers(files):
    spec = JobSpec(config(total_steps=300, eval_every=150), data=str(files["csv"]), eval_fraction=0.25, init_from=str(files["model"]),
                   run_dir=str(files["root"] / "run"))
    trainer = prepare_job(spec).trainer
    events: list[tuple[str, dict]] = []
    assert trainer.train(callback=lambda kind, record: events.append((kind, record))).status == "finished"
    train = [r for kind, r in events if kind == "train"]
    evals = [r for kind, r in events if kind == "eval"]
    assert set(evals[-1]) == {"step", "eval_multiple_choice_loss", "eval_accuracy"}
    assert sum(r["accuracy"] for r in train[-10:]) / 10 >= 0.6, train[-10:]      # chance is 0.25
    assert evals[-1]["eval_accuracy"] >= 0.5 and evals[-1]["eval_multiple_choice_loss"] < 1.3, evals   # ln 4 = 1.39
    assert trainer.model.heads == ("mlm", "nsp", "multiple_choice")
    checkpoint = RunFolder(trainer.run_dir).checkpoints()[0].path
    assert_transformers_agrees(checkpoint, transformers.BertForMultipleChoice, trainer.eval_data.batch(0, 0),
                               "multiple_choice")


def test_next_sentence_choices_from_documents_without_a_data_file(files, tmp_path):
    documents = [[f"the {name} was {color} ." for color in ("red", "blue", "big", "small")] for name in NAMES]
    spec = JobSpec(config(total_steps=2, warmup_steps=0, eval_every=2, batch_size=4), documents=documents, corpus_label="colours",
                   task_settings={"num_choices": 3}, eval_fraction=0.25, init_from=str(files["model"]), run_dir=str(tmp_path / "run"))
    trainer = prepare_job(spec).trainer
    assert trainer.train_data.num_choices == 3 and len(trainer.train_data) == 6 * 3 and len(trainer.eval_data) == 2 * 3
    trainer.train()
    assert trainer.last_eval["step"] == 2 and "eval_accuracy" in trainer.last_eval
    resumed = prepare_job(JobSpec({"total_steps": 3}, resume_from=str(tmp_path / "run"), documents=documents)).trainer
    assert resumed.global_step == 2 and resumed.train_data.fingerprint() == trainer.train_data.fingerprint()
    with pytest.raises(ValueError, match="num_choices must be 2 to 5, got 7"):
        prepare_job(spec.replace(task_settings={"num_choices": 7}))
    with pytest.raises(ValueError, match="corpus: no built-in corpus or file named 'nope'"):
        prepare_job(spec.replace(documents=None, corpus="nope"))


def test_bad_files_exit_2_with_the_line(files, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("context,choice0,choice1,label\nthe cat,a dog,a cat,3\n")
    code = main(["--task", "multiple-choice", "--data", str(bad), "--init-from", str(files["model"]),
                 "--seq-len", "32", "--run-dir", str(tmp_path / "run"), "--threads", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "bad.csv, line 2: label 3 is out of range: there are 2 choices, so it must be 0 to 1" in err


def test_torchrun_two_gloo_processes_fine_tune_to_identical_weights(files, tmp_path):
    run_dir = tmp_path / "ddp"
    result = torchrun("engine.finetune", [
        "--task", "multiple-choice", "--data", str(files["csv"]), "--init-from", str(files["model"]), "--steps", "3",
        "--batch-size", "4", "--seq-len", "32", "--lr", "3e-3", "--warmup", "1", "--eval-fraction", "0.25",
        "--run-dir", str(run_dir), "--threads", "1", "--no-progress", "--debug-dump-weights"])
    assert result.returncode == 0, result.stderr[-3000:]
    rank0 = torch.load(run_dir / "weights-rank0.pt", weights_only=True)
    rank1 = torch.load(run_dir / "weights-rank1.pt", weights_only=True)
    assert rank0.keys() == rank1.keys() and all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    initial = load_directory(files["model"]).model.state_dict()
    assert any(not torch.equal(rank0[k], initial[k]) for k in initial if k in rank0)     # it did train
    assert {"multiple_choice.weight", "multiple_choice.bias"} <= set(rank0)
    assert [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"] == [1, 2, 3]
