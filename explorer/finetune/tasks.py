"""The fine-tuning tasks the Fine-tune tab offers: one row each, read by the form, the checks, the job and the
curves. Adding a task (once the engine trains it: ``engine.training.config.TASKS``, a predictor in
``engine.training.eval_examples.PREDICTORS``) is adding a row here with a reader for its data.

A row says: the task's name (``TrainingConfig.task``) and label, the data it accepts (in words and as
file endings), its bundled example(s), the form's defaults (chosen to learn within a minute on 2 CPU
cores from the bundled default model on the bundled example), the held-out loss and the metrics to
plot, how a file is checked before a run starts (``read``: the example count and a short summary, or a
``ValueError`` that says what is wrong; classification also checks the labels a person listed), and the
extra ``JobSpec`` fields it needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from engine.data.classification import label_names, read_classification_file
from engine.data.qa_features import read_squad

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "examples"


@dataclass(frozen=True)
class DataCheck:
    """What a task's reader found in a file: how many examples, and a line about them for the status."""

    examples: int
    summary: str
    labels: tuple[str, ...] = ()        # classification: the distinct labels, in id order


@dataclass(frozen=True)
class FinetuneTask:
    """One row of the task table."""

    name: str                                       # TrainingConfig.task
    label: str                                      # shown in the task dropdown
    formats: str                                    # the data it accepts, in words (Markdown)
    extensions: tuple[str, ...]                     # file endings an upload may have
    examples: tuple[tuple[str, Path], ...]          # (name, path) of the bundled examples; the first is the default
    defaults: dict[str, float]                      # steps, batch_size, learning_rate, seq_length, eval_fraction
    eval_loss: str                                  # the eval record's loss key
    metrics: tuple[tuple[str, str], ...]            # (metric key, legend name): train ``key``, held-out ``eval_key``
    read: Callable[[Path, tuple[str, ...]], DataCheck]   # checks a file (and the labels asked for, if any)
    spec_fields: Callable[[int], dict[str, Any]] = field(default=lambda seq_length: {})   # extra JobSpec fields
    takes_labels: bool = False                      # the form's "labels" box applies


def read_classification(path: Path, expected: tuple[str, ...] = ()) -> DataCheck:
    """A classification CSV/TSV/JSONL: at least two examples and two different labels, each one of
    ``expected`` when it is given."""
    examples = read_classification_file(path)
    for e in examples:
        if expected and e.label not in expected:
            raise ValueError(f"{path.name}, line {e.line}: the label {e.label!r} is not one of the labels you "
                             f"listed ({', '.join(expected)}); fix that row or add the label to the list")
    names = tuple(label_names([e.label for e in examples]).values())
    if len(names) < 2:
        raise ValueError(f"{path.name}: classification needs at least two different labels; every row has "
                         f"{names[0]!r}")
    if len(examples) < 2:
        raise ValueError(f"{path.name}: one example is too few to train on and hold one out; add rows")
    return DataCheck(len(examples), f"{len(examples):,} examples · labels: {', '.join(names)}", names)


def read_qa(path: Path, expected: tuple[str, ...] = ()) -> DataCheck:
    """A SQuAD v1.1 / v2.0 JSON file with at least one usable question."""
    squad = read_squad(path)
    if not squad.examples:
        raise ValueError(f"{path.name} has no usable questions ({squad.summary()})")
    contexts = len({e.context for e in squad.examples})
    return DataCheck(len(squad.examples), f"{len(squad.examples):,} questions about {contexts:,} contexts")


def qa_fields(seq_length: int) -> dict[str, Any]:
    """QA windows that fit ``seq_length``: questions cut to a quarter of it (at most 64 tokens), windows
    overlapping by a quarter (at most 128), as ``run_squad.py`` does at 384."""
    quarter = max(1, seq_length // 4)
    return {"max_question_len": min(64, quarter), "doc_stride": min(128, quarter)}


TASKS: dict[str, FinetuneTask] = {row.name: row for row in (
    FinetuneTask(
        name="classification", label="Sequence classification (a label per text)",
        formats=("**CSV** with a header naming `text` and `label` (`text_pair` optional; other columns are "
                 "ignored), a **TSV** with the same header, or **JSONL** (one `{\"text\": ..., \"label\": ...}` "
                 "per line). Labels are names or numbers; at least two different ones. UTF-8."),
        extensions=(".csv", ".tsv", ".jsonl"),
        examples=(("sentiment.csv", EXAMPLES_DIR / "sentiment.csv"),),
        defaults=dict(steps=30, batch_size=16, learning_rate=1e-4, seq_length=64, eval_fraction=0.2),
        eval_loss="eval_classification_loss", metrics=(("accuracy", "accuracy"),),
        read=read_classification, takes_labels=True),
    FinetuneTask(
        name="qa", label="Extractive question answering (SQuAD)",
        formats=("**SQuAD JSON** (v1.1, or v2.0 with `is_impossible`): `{\"data\": [{\"title\", \"paragraphs\": "
                 "[{\"context\", \"qas\": [{\"id\", \"question\", \"answers\": [{\"text\", \"answer_start\"}]}]}]}]}`; "
                 "`answer_start` is the answer's character offset in the context. UTF-8."),
        extensions=(".json",),
        examples=(("tiny_squad.json", EXAMPLES_DIR / "tiny_squad.json"),),
        defaults=dict(steps=30, batch_size=8, learning_rate=5e-5, seq_length=128, eval_fraction=0.2),
        eval_loss="eval_qa_loss", metrics=(("span_acc", "exact span"), ("start_acc", "start"), ("end_acc", "end")),
        read=read_qa, spec_fields=qa_fields),
)}


def task_row(name: str | None) -> FinetuneTask:
    """The row of ``name``; ValueError listing the tasks when there is none."""
    row = TASKS.get(name or "")
    if row is None:
        raise ValueError(f"unknown task {name!r}; choose one of: {', '.join(TASKS)}")
    return row


def task_choices() -> list[tuple[str, str]]:
    """(label, name) of every task, for the dropdown."""
    return [(row.label, row.name) for row in TASKS.values()]
