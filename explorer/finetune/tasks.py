"""The fine-tuning tasks the Fine-tune tab offers: one row each, read by the form, the checks, the job and the
curves. A row is the UI of a registered task (its ``TaskDefinition``, ``engine.training.tasks.registry``:
name, heads, loss and metrics, predictor); offering a task the engine trains is adding a row here with a
reader for its data.

A row says: the task's definition and label, the data it accepts (in words and as file endings), its
bundled example(s), the form's defaults (chosen to learn within a minute on 2 CPU cores from the bundled
default model on the bundled example), how a file is checked before a run starts (``read``, in
``explorer.finetune.readers``: the example count and a short summary, or a ``ValueError`` that says what is
wrong; classification and tagging also check the labels a person listed), and the values of its own
``JobSpec`` fields (the definition's ``spec_fields``) and of its own settings (``settings``: the definition's
``settings`` dataclass, by field name; those not given take their defaults). A bundled example may be data
without a file: multiple choice's built-in "which sentence comes next?" is ``data=None`` with the example's
``fields`` (``corpus``, ``num_choices``, ``max_documents``), checked by ``check_builtin``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from engine.training.tasks.finetuning import CLASSIFICATION, QA
from engine.training.tasks.multiple_choice import MULTIPLE_CHOICE
from engine.training.tasks.registry import TaskDefinition
from engine.training.tasks.token_classification import TOKEN_CLASSIFICATION
from explorer.runs.legends import metric_legends
from explorer.finetune.readers import (DataCheck, check_next_sentence, read_choices, read_classification, read_qa,
                                       read_tagged)

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "examples"
NEXT_SENTENCE = "next sentence, from Shakespeare (built in)"
NEXT_SENTENCE_SCENES = 40        # scenes the built-in next-sentence example is made from (~2,600 examples)


@dataclass(frozen=True)
class BundledExample:
    """A bundled example: a file under ``assets/examples``, or (``path`` None) data the engine builds itself
    from the ``JobSpec`` fields in ``fields`` (the built-in next-sentence choices)."""

    name: str
    path: Path | None
    note: str = ""                                  # shown under the accepted formats (what it is, its licence)
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FinetuneTask:
    """One row of the task table."""

    definition: TaskDefinition                      # the engine's task (name, loss, metrics, ...)
    label: str                                      # shown in the task dropdown
    formats: str                                    # the data it accepts, in words (Markdown)
    extensions: tuple[str, ...]                     # file endings an upload may have
    examples: tuple[BundledExample, ...]            # the bundled examples; the first is the default
    defaults: dict[str, float]                      # steps, batch_size, learning_rate, seq_length, eval_fraction
    read: Callable[[Path, tuple[str, ...]], DataCheck]   # checks a file (and the labels asked for, if any)
    spec_fields: Callable[[int], dict[str, Any]] = field(default=lambda seq_length: {})   # extra JobSpec fields
    settings: Callable[[int], dict[str, Any]] = field(default=lambda seq_length: {})   # its own settings' values
    takes_labels: bool = False                      # the form's "labels" box applies
    labels_hint: str = ""                           # the labels box's placeholder
    check_builtin: Callable[[dict[str, Any]], DataCheck] | None = None   # checks an example without a file
    unit: str = "examples"                          # what one prediction of the "gets wrong" table is
    parts: tuple[str, str] = ("input", "")          # what a prediction's text and context are, in words
    spans: bool = False                             # answers are spans of the input (quoted; shown with it)

    @property
    def name(self) -> str:
        """The task's name (``TrainingConfig.task``)."""
        return self.definition.name

    @property
    def eval_loss(self) -> str:
        """The eval record's loss key."""
        return self.definition.eval_loss

    @property
    def metrics(self) -> tuple[tuple[str, str], ...]:
        """(metric key, legend name) of each metric plotted: train ``key``, held-out ``eval_key`` (the names:
        ``explorer.runs.legends``; the held-out loss is ``eval_loss``)."""
        return metric_legends(self.definition)


def qa_fields(seq_length: int) -> dict[str, Any]:
    """QA windows that fit ``seq_length``: questions cut to a quarter of it (at most 64 tokens), windows
    overlapping by a quarter (at most 128), as ``run_squad.py`` does at 384."""
    quarter = max(1, seq_length // 4)
    return {"max_question_len": min(64, quarter), "doc_stride": min(128, quarter)}


FINETUNE_ROWS: dict[str, FinetuneTask] = {row.name: row for row in (
    FinetuneTask(
        definition=CLASSIFICATION, label="Sequence classification (a label per text)",
        formats=("**CSV** with a header naming `text` and `label` (`text_pair` optional; other columns are "
                 "ignored), a **TSV** with the same header, or **JSONL** (one `{\"text\": ..., \"label\": ...}` "
                 "per line). Labels are names or numbers; at least two different ones. UTF-8."),
        extensions=(".csv", ".tsv", ".jsonl"),
        examples=(BundledExample("sentiment.csv", EXAMPLES_DIR / "sentiment.csv"),),
        defaults=dict(steps=30, batch_size=16, learning_rate=1e-4, seq_length=64, eval_fraction=0.2),
        read=read_classification, takes_labels=True, labels_hint="positive, negative"),
    FinetuneTask(
        definition=QA, label="Extractive question answering (SQuAD)",
        formats=("**SQuAD JSON** (v1.1, or v2.0 with `is_impossible`): `{\"data\": [{\"title\", \"paragraphs\": "
                 "[{\"context\", \"qas\": [{\"id\", \"question\", \"answers\": [{\"text\", \"answer_start\"}]}]}]}]}`; "
                 "`answer_start` is the answer's character offset in the context. UTF-8."),
        extensions=(".json",),
        examples=(BundledExample("tiny_squad.json", EXAMPLES_DIR / "tiny_squad.json"),
                  BundledExample("tiny_squad_v2.json", EXAMPLES_DIR / "tiny_squad_v2.json",
                                 note="`tiny_squad_v2.json`: the same 6 paragraphs and 35 questions, and 18 "
                                      "questions they do not answer (SQuAD v2.0, written for this project).")),
        defaults=dict(steps=30, batch_size=8, learning_rate=5e-5, seq_length=128, eval_fraction=0.2),
        read=read_qa, spec_fields=qa_fields, parts=("question", "context"), spans=True),
    FinetuneTask(
        definition=TOKEN_CLASSIFICATION, label="Tag words (part of speech, entities)",
        formats=("**CoNLL-U** (`.conllu`: the word (FORM) and its universal part-of-speech tag (UPOS) are used) or "
                 "**one word and its tag per line**, `word<TAB>tag` (`.tsv`, `.txt`), a blank line between "
                 "sentences. Tags are used as written: part of speech (`NOUN`, `VERB`) or BIO entity tags (`B-PER`, "
                 "`I-PER`, `O`: then entity F1 is measured too). A word's tag is learnt on its first word piece. "
                 "UTF-8."),
        extensions=(".conllu", ".tsv", ".txt"),
        examples=(BundledExample(
            "pos-ewt-sample.tsv", EXAMPLES_DIR / "pos-ewt-sample.tsv",
            note=("`pos-ewt-sample.tsv`: 312 English sentences with their universal part-of-speech tags, from "
                  "[Universal Dependencies English EWT](https://github.com/UniversalDependencies/UD_English-EWT) "
                  "(Silveira et al., 2014), licensed **CC BY-SA 4.0** "
                  "(https://creativecommons.org/licenses/by-sa/4.0/); only the word and tag columns are kept "
                  "(`assets/examples/README.md`).")),),
        defaults=dict(steps=40, batch_size=16, learning_rate=3e-4, seq_length=64, eval_fraction=0.2),
        read=read_tagged, takes_labels=True, labels_hint="NOUN, VERB, ADJ, … (or B-PER, I-PER, O)",
        unit="sentences", parts=("sentence", "")),
    FinetuneTask(
        definition=MULTIPLE_CHOICE, label="Choose the right ending",
        formats=("**CSV** with a header naming `context`, `choice0` .. `choiceN-1` (2 to 5 choices, numbered from 0) "
                 "and `label`, the number of the right choice (0 to N-1); other columns are ignored. Each choice is "
                 "read after its context as a text pair (BERT: `[CLS] context [SEP] choice [SEP]`). UTF-8. Or no "
                 "file: the built-in *which of 4 sentences comes next?* made from Shakespeare's plays."),
        extensions=(".csv",),
        examples=(BundledExample("choices.csv", EXAMPLES_DIR / "choices.csv",
                                 note="`choices.csv`: 40 everyday situations with 4 endings, one sensible "
                                      "(written for this project)."),
                  BundledExample(NEXT_SENTENCE, None, fields=dict(corpus="shakespeare", num_choices=4,
                                                                  max_documents=NEXT_SENTENCE_SCENES),
                                 note=(f"*{NEXT_SENTENCE}*: for each sentence of the first {NEXT_SENTENCE_SCENES} "
                                       "scenes of Shakespeare's plays (public domain), the next sentence among "
                                       "3 sentences of other scenes; the held-out scenes are never trained on."))),
        defaults=dict(steps=40, batch_size=8, learning_rate=5e-5, seq_length=64, eval_fraction=0.2),
        read=read_choices, check_builtin=check_next_sentence, parts=("context", "choices")),
)}


def task_row(name: str | None) -> FinetuneTask:
    """The row of ``name``; ValueError listing the tasks when there is none."""
    row = FINETUNE_ROWS.get(name or "")
    if row is None:
        raise ValueError(f"unknown task {name!r}; choose one of: {', '.join(FINETUNE_ROWS)}")
    return row


def task_choices() -> list[tuple[str, str]]:
    """(label, name) of every task, for the dropdown."""
    return [(row.label, row.name) for row in FINETUNE_ROWS.values()]
