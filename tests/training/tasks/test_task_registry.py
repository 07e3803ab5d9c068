"""The task registry: every registered task is complete (heads the model knows, defaults, metrics, a data
builder and a predictor for fine-tuning), and a new task is one module + one ``register`` line: a toy task
defined here, with a setting of its own, trains through ``prepare_job`` and the ``engine.finetune`` command line
(its setting a flag in ``--help``, kept in ``run.json`` and on resume) with nothing else changed."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pytest
import torch

from engine.finetune import main as finetune_main
from engine.model.head_specs import HEADS
from engine.training.jobs.setup import prepare_job
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.loop.config import TrainingConfig
from engine.training.loop.training_task import TrainingTask
from engine.training.tasks import task_for
from engine.training.tasks.registry import (TRAINING_TASKS, TaskDefinition, finetuning_tasks, register, registered,
                                            task_definition)
from support.finetune_helpers import save_tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")

BUILT_IN = ("pretraining", "qa", "qa_mlm", "classification", "token_classification", "multiple_choice")


# ---------------------------------------------------------------------------- a toy task, as its module would be
@dataclass
class FirstWordBatch:
    """Token ids (B, S), their mask (B, S) and a label per row (B,)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor

    @property
    def num_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def to(self, device: torch.device, non_blocking: bool = False) -> "FirstWordBatch":
        return FirstWordBatch(*(t.to(device, non_blocking=non_blocking) for t in
                                (self.input_ids, self.attention_mask, self.labels)))


class FirstWordData:
    """Padded rows read in a fixed order, ``batch_size`` at a time."""

    def __init__(self, rows: list[list[int]], labels: list[int], batch_size: int, seq_len: int) -> None:
        self.rows, self.labels, self.batch_size, self.seq_len = rows, labels, batch_size, seq_len
        self.example_index = torch.arange(len(rows))      # the example of each row (the command line counts them)

    def __len__(self) -> int:
        return len(self.rows)

    def num_batches(self, epoch: int) -> int:
        return len(self.rows) // self.batch_size

    def batch(self, epoch: int, index: int) -> FirstWordBatch:
        rows = self.rows[index * self.batch_size:(index + 1) * self.batch_size]
        ids = torch.zeros(len(rows), self.seq_len, dtype=torch.long)                     # (B, S), [PAD] = 0
        for r, row in enumerate(rows):
            ids[r, :len(row)] = torch.tensor(row)
        labels = torch.tensor(self.labels[index * self.batch_size:(index + 1) * self.batch_size])
        return FirstWordBatch(ids, (ids != 0).long(), labels)

    def fingerprint(self) -> str:
        return hashlib.sha256(repr((self.rows, self.labels, self.batch_size)).encode()).hexdigest()


class FirstWordTask(TrainingTask):
    """Is the line about a cat or a dog (its first word)? The classifier head on the pooled [CLS] vector."""

    name, head = "toy_first_word", "classifier"
    stat_names = ("toy_loss_sum", "correct")

    def __init__(self, settings: "FirstWordSettings") -> None:
        self.settings = settings

    def heads(self, config: TrainingConfig) -> tuple[str, ...]:
        return (self.head,)

    def uses_pooler(self, config: TrainingConfig) -> bool:
        return True

    def check(self, model: Any, train_data: Any, eval_data: Any, config: TrainingConfig) -> None:
        if self.head not in model.heads:
            raise ValueError("the toy task needs a classifier head")

    def counts(self, batch: FirstWordBatch) -> tuple[int]:
        return (int(batch.labels.shape[0]),)

    def forward(self, net: torch.nn.Module, batch: FirstWordBatch, config: TrainingConfig) -> Any:
        return net(batch.input_ids, attention_mask=batch.attention_mask,
                   token_type_ids=torch.zeros_like(batch.input_ids), class_labels=batch.labels,
                   compute=(self.head,))

    def losses(self, out: Any) -> list[torch.Tensor]:
        return [out.classifier.loss]

    def tally(self, out: Any, batch: FirstWordBatch, counts: Sequence[int]) -> torch.Tensor:
        with torch.no_grad():
            correct = (out.classifier.logits.argmax(-1) == batch.labels).sum().float()
            return torch.stack((out.classifier.loss.detach().float() * counts[0], correct))

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        n = max(1, totals[0])
        return {"toy_loss": sums[0] / n, "toy_acc": sums[1] / n}


def first_word_data(spec: JobSpec, config: TrainingConfig, tokenizer: Any, id2label: dict[int, str] | None = None,
                    log: Any = lambda message: None, known: dict[int, str] | None = None, *,
                    settings: "FirstWordSettings") -> tuple[FirstWordData, FirstWordData | None, dict[int, str]]:
    """The lines of ``spec.data``, labelled by their word ``label_word`` (its own setting; cat 0, dog 1); all
    trained on, all evaluated."""
    lines = [line.strip() for line in Path(spec.data).read_text(encoding="utf-8").splitlines() if line.strip()]
    names = id2label or {0: "cat", 1: "dog"}
    label2id = {name: i for i, name in names.items()}
    rows = [tokenizer.encode(line, max_length=config.max_seq_length).input_ids for line in lines]
    labels = [label2id[line.split()[settings.label_word]] for line in lines]
    log(f"{spec.data}: {len(lines)} lines")
    return (FirstWordData(rows, labels, config.batch_size, config.max_seq_length),
            FirstWordData(rows, labels, config.batch_size, config.max_seq_length), names)


@dataclass(frozen=True)
class FirstWordSettings:
    """The toy task's own settings: a ``JobSpec.task_settings`` entry, a flag, a Fine-tune row's value."""

    label_word: int = field(default=0, metadata={"help": "which word of a line is its label, counted from 0"})

    def __post_init__(self) -> None:
        if not isinstance(self.label_word, int) or self.label_word < 0:
            raise ValueError(f"label_word must be a whole number >= 0, got {self.label_word!r}")


TOY = TaskDefinition(
    name=FirstWordTask.name, heads=(FirstWordTask.head,), make=lambda config, settings: FirstWordTask(settings), loss="toy_loss",
    metrics=("toy_acc",), shown=(("toy_loss", ".4f"), ("toy_acc", ".3f")), data=first_word_data,
    defaults=dict(seq_len=16, batch_size=4), training=dict(nsp=False), settings=FirstWordSettings)


# ---------------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("toy-task")
    lines = [f"{animal} {rest}" for animal in ("cat", "dog")
             for rest in ("sat on the mat", "ran to the house", "is big", "played with a bird")]
    data = root / "animals.txt"
    data.write_text("\n".join(lines[i // 2 + (i % 2) * 4] for i in range(8)) + "\n", encoding="utf-8")
    second = root / "second.txt"             # the label is the second word (--label-word 1)
    second.write_text("\n".join("the " + line for line in data.read_text().splitlines()) + "\n", encoding="utf-8")
    return {"model": save_tiny_model(root / "model", tiny_tokenizer), "data": data, "second": second}


def check_tasks() -> None:
    """The built-in tasks come first, in order, each registered once (a name is a dict key); a new one follows."""
    assert tuple(TRAINING_TASKS)[:len(BUILT_IN)] == BUILT_IN
    assert finetuning_tasks()[:len(BUILT_IN) - 1] == BUILT_IN[1:]
    assert all(definition.name == name for name, definition in TRAINING_TASKS.items())


def test_the_built_in_tasks_are_registered_in_order():
    check_tasks()
    with registered(TOY):
        check_tasks()
        assert tuple(TRAINING_TASKS)[-1] == TOY.name


@pytest.mark.parametrize("name", list(TRAINING_TASKS))
def test_every_task_is_complete(name):
    definition = task_definition(name)
    assert definition.name == name
    assert definition.heads and all(head in HEADS for head in definition.heads)
    assert set(definition.defaults) == {"seq_len", "batch_size"}
    assert definition.loss and definition.metrics and definition.shown
    assert definition.eval_loss == "eval_" + definition.loss
    task = definition.make_task(TrainingConfig(task=name))
    assert isinstance(task, TrainingTask) and task.name == name
    assert set(task.heads(TrainingConfig(task=name))) == set(definition.heads)   # nsp on: every head it needs
    if definition.finetuning:
        assert definition.data is not None and definition.predictor is not None


def test_unknown_and_taken_names_are_refused():
    with pytest.raises(ValueError, match="unknown task 'ner'; choose one of pretraining, qa, qa_mlm"):
        task_definition("ner")
    with pytest.raises(ValueError, match="a task named 'qa' is registered already"):
        register(task_definition("qa"))


def test_a_registered_toy_task_trains_through_prepare_job(files, tmp_path):
    with registered(TOY):
        config = TrainingConfig(task=TOY.name, learning_rate=5e-3, warmup_steps=0, total_steps=40, batch_size=4,
                                max_seq_length=16, eval_every=40, eval_batches=0, checkpoint_every=0, nsp=False)
        assert isinstance(task_for(config), FirstWordTask)
        job = prepare_job(JobSpec(config, init_from=str(files["model"]), data=str(files["data"]),
                                  run_dir=str(tmp_path / "run")))
        events: list[tuple[str, dict]] = []
        assert job.trainer.train(callback=lambda kind, record: events.append((kind, record))).status == "finished"
    train = [r for k, r in events if k == "train"]
    evals = [r for k, r in events if k == "eval"]
    first, last = sum(r["toy_loss"] for r in train[:4]) / 4, sum(r["toy_loss"] for r in train[-4:]) / 4
    assert last < first * 0.7, (first, last)
    assert {"toy_loss", "toy_acc"} <= set(train[-1]) and evals[-1]["eval_toy_acc"] == 1.0
    assert job.trainer.model.config.id2label == {0: "cat", 1: "dog"}
    assert "classifier" in job.trainer.model.heads
    assert json.loads((tmp_path / "run" / "run.json").read_text())["task"] == TOY.name
    with pytest.raises(ValueError, match="unknown task 'toy_first_word'"):   # gone after the block
        JobSpec(TrainingConfig(task=TOY.name)).training_config()


def test_the_command_line_offers_and_runs_a_registered_task(files, tmp_path, capsys):
    with registered(TOY):
        code = finetune_main(["--task", TOY.name, "--data", str(files["data"]), "--init-from", str(files["model"]),
                              "--steps", "4", "--lr", "1e-3", "--eval-every", "0", "--checkpoint-every", "0",
                              "--threads", "1", "--no-progress", "--run-dir", str(tmp_path / "cli")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"run {tmp_path / 'cli'}: {TOY.name} from" in err and "labels ['cat', 'dog']" in err
    assert "step 4/4 toy_loss=" in err and " toy_acc=" in err            # its ``shown`` metrics


def test_the_toy_tasks_setting_is_a_flag_in_help_and_kept_in_the_run(files, tmp_path, capsys):
    from engine.finetune import build_parser

    assert "--label-word" not in build_parser().format_help()
    with registered(TOY):
        text = build_parser().format_help()
        assert "toy_first_word settings:" in text and "--label-word LABEL_WORD" in text
        assert "toy_first_word: which word of a line is its label, counted from 0 (default 0)" in " ".join(text.split())
        run = tmp_path / "cli"
        code = finetune_main(["--task", TOY.name, "--data", str(files["second"]), "--init-from", str(files["model"]),
                              "--label-word", "1", "--steps", "2", "--eval-every", "0", "--checkpoint-every", "0",
                              "--threads", "1", "--no-progress", "--run-dir", str(run)])
        assert code == 0, capsys.readouterr().err
        assert json.loads((run / "run.json").read_text())["task_settings"] == {"label_word": 1}
        resumed = resume_spec(run)
        assert resumed.task_settings == {"label_word": 1} and resumed.settings == FirstWordSettings(1)
        for argv, message in (
                (["--task", TOY.name, "--label-word", "-1"], "--label-word must be a whole number >= 0, got -1"),
                (["--task", "classification", "--label-word", "1"], "--label-word is for task toy_first_word, not "
                                                                     "classification"),
                (["--resume", str(run), "--label-word", "0"], "cannot change --label-word when resuming")):
            with pytest.raises(SystemExit) as exited:
                finetune_main(argv + ["--data", str(files["data"]), "--init-from", str(files["model"])]
                              if "--resume" not in argv else argv)
            assert exited.value.code == 2 and message in capsys.readouterr().err, argv
        with pytest.raises(ValueError, match="unknown setting.*toy_first_word: label_wrd; its settings: label_word"):
            JobSpec(TrainingConfig(task=TOY.name), data=str(files["data"]), task_settings={"label_wrd": 1}).validate()
    with pytest.raises(ValueError, match="task classification has no settings of its own, got label_word"):
        JobSpec(TrainingConfig(task="classification"), data=str(files["data"]),
                task_settings={"label_word": 1}).validate()


def test_a_task_without_settings_writes_run_json_as_before(files, tmp_path):
    record = JobSpec(TrainingConfig(task="classification"), data=str(files["data"])).to_record()
    assert "task_settings" not in record
    assert JobSpec.from_record(record, TrainingConfig(task="classification")).task_settings == {}
    with pytest.raises(TypeError, match="task_settings must be an object"):      # an edited run.json: damaged
        JobSpec.from_record({**record, "task_settings": [1]}, TrainingConfig(task="classification"))


def test_finetune_help_names_each_tasks_own_defaults_from_the_registry():
    """``python -m engine.finetune --help`` derives the per-task defaults from the definitions, so a new task's
    defaults show there with no edit to the command line."""
    from engine.finetune import per_task_default
    from engine.training.tasks.registry import finetuning_tasks, task_definition

    for key in ("seq_len", "batch_size"):
        text = per_task_default(key)
        for name in finetuning_tasks():
            group = next(part for part in text.split(" / ") if name in part.split(" ", 1)[1].split(", "))
            assert group.split(" ", 1)[0] == str(task_definition(name).defaults[key])
    first = per_task_default("seq_len").split(" / ")[0]
    assert first.startswith("384 ") and {"qa", "qa_mlm"} <= set(first[4:].split(", "))
