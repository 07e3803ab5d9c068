"""The fine-tuning tasks the Fine-tune tab offers: one row each, read by the form, the checks, the job and the
curves. A row is the UI of a registered task (its ``TaskDefinition``, ``engine.training.tasks.registry``:
name, heads, loss and metrics, predictor, settings). The tab offers every registered fine-tuning task whose
definition says ``in_app`` (``finetune_rows``): a built-in task has a hand-written row
here (``BUILT_IN_ROWS``: its bundled examples and a reader that checks a file before a run starts), and any
other task gets a plain row from its definition (its label, formats and file endings; an upload checked by
the engine when the run starts), so a new task needs no edit here.

A row says: the task's definition and label, the data it accepts (in words and as file endings), its
bundled example(s), the form's defaults (chosen to learn within a minute on 2 CPU cores from the bundled
default model on the bundled example), how a file is checked before a run starts (``read``, in
``explorer.finetune.readers``: the example count and a short summary, or a ``ValueError`` that says what is
wrong; classification and tagging also check the labels a person listed), and the values its own settings
take when the form leaves them empty (``settings``: by field name, for the sequence length; those not given
take their dataclass defaults). The settings themselves are the form's fields (``explorer.finetune.
settings_form``). A bundled example may be data without a file: multiple choice's built-in "which sentence
comes next?" is ``data=None`` with the example's ``fields`` (``corpus``, ``max_documents``) and ``settings``
(``num_choices``), checked by ``check_builtin``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from engine.training.tasks.finetuning import CLASSIFICATION, QA
from engine.training.tasks.multiple_choice import MULTIPLE_CHOICE
from engine.training.tasks.registry import TRAINING_TASKS, TaskDefinition
from engine.training.tasks.token_classification import TOKEN_CLASSIFICATION
from explorer.runs.legends import metric_legends
from explorer.finetune.readers import (DataCheck, check_next_sentence, read_any, read_choices, read_classification,
                                       read_qa, read_tagged)

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "examples"
NEXT_SENTENCE = "next sentence, from Shakespeare (built in)"
NEXT_SENTENCE_SCENES = 40        # scenes the built-in next-sentence example is made from (~2,600 examples)


@dataclass(frozen=True)
class BundledExample:
    """A bundled example: a file under ``assets/examples``, or (``path`` None) data the engine builds itself
    from the ``JobSpec`` fields in ``fields`` and the task's ``settings`` (the built-in next-sentence choices)."""

    name: str
    path: Path | None
    note: str = ""                                  # shown under the accepted formats (what it is, its licence)
    fields: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


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
    settings: Callable[[int], dict[str, Any]] = field(default=lambda seq_length: {})   # its settings' empty values
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


def qa_windows(seq_length: int) -> dict[str, Any]:
    """QA windows that fit ``seq_length``: questions cut to a quarter of it (at most 64 tokens), windows
    overlapping by a quarter (at most 128), as ``run_squad.py`` does at 384."""
    quarter = max(1, seq_length // 4)
    return {"max_question_len": min(64, quarter), "doc_stride": min(128, quarter)}


BUILT_IN_ROWS: dict[str, FinetuneTask] = {row.name: row for row in (
    FinetuneTask(
        definition=CLASSIFICATION, label="Sequence classification (a label per text)",
        formats=("**CSV** with a header naming `text` and `label` (`text_pair` optional; other columns are "
                 "ignored), a **TSV** with the same header, or **JSONL** (one `{\"text\": ..., \"label\": ...}` "
                 "per line). Labels are names or numbers; at least two different ones. UTF-8."),
        extensions=(".csv", ".tsv", ".jsonl"),
        examples=(BundledExample("sentiment.csv", EXAMPLES_DIR / "sentiment.csv"),
                  BundledExample("qnli-squad-sample.csv", EXAMPLES_DIR / "qnli-squad-sample.csv",
                                 note=("`qnli-squad-sample.csv`: 1,000 text pairs, QNLI-style: a question and a "
                                       "sentence of its paragraph, `entailment` if the sentence holds the answer; "
                                       "made from SQuAD v1.1 (Rajpurkar et al., 2016; Wikipedia text), licensed "
                                       "**CC BY-SA 4.0** (`assets/examples/README.md`)."))),
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
        read=read_qa, settings=qa_windows, parts=("question", "context"), spans=True),
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
                  "(`assets/examples/README.md`).")),
                  BundledExample(
            "ner-wnut17-sample.tsv", EXAMPLES_DIR / "ner-wnut17-sample.tsv",
            note=("`ner-wnut17-sample.tsv`: 2,000 social-media posts with BIO entity tags of six types (person, "
                  "location, group, creative work, corporation, product), from [WNUT 17 Emerging Entities]"
                  "(https://github.com/leondz/emerging_entities_17) (Derczynski et al., 2017), licensed **CC BY 4.0** "
                  "(https://creativecommons.org/licenses/by/4.0/). Entities are rare (3% of words): give it about "
                  "300 steps at 5e-4 before entity F1 moves (the default model: 0.48 held out, "
                  "`assets/examples/README.md`)."))),
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
                  BundledExample(NEXT_SENTENCE, None, fields=dict(corpus="shakespeare",
                                                                  max_documents=NEXT_SENTENCE_SCENES),
                                 settings=dict(num_choices=4),
                                 note=(f"*{NEXT_SENTENCE}*: for each sentence of the first {NEXT_SENTENCE_SCENES} "
                                       "scenes of Shakespeare's plays (public domain), the next sentence among "
                                       "3 sentences of other scenes; the held-out scenes are never trained on."))),
        defaults=dict(steps=40, batch_size=8, learning_rate=5e-5, seq_length=64, eval_fraction=0.2),
        read=read_choices, check_builtin=check_next_sentence, parts=("context", "choices")),
)}


# A task without a hand-written row: what its plain row starts from (its definition's defaults cap the lengths)
PLAIN_DEFAULTS = dict(steps=30, batch_size=16, learning_rate=5e-5, seq_length=128, eval_fraction=0.2)
PLAIN_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json", ".txt", ".conllu")


def plain_row(definition: TaskDefinition) -> FinetuneTask:
    """The row of a registered task with no hand-written row: named, described and typed by its definition, no
    bundled example (an upload, which the engine reads when the run starts)."""
    defaults = dict(PLAIN_DEFAULTS, batch_size=min(PLAIN_DEFAULTS["batch_size"], definition.defaults.get(
        "batch_size", 16)), seq_length=min(PLAIN_DEFAULTS["seq_length"], definition.defaults.get("seq_len", 128)))
    return FinetuneTask(
        definition=definition, label=definition.label or definition.name,
        formats=definition.formats or "A file of the task's examples; the engine reads it when the run starts.",
        extensions=definition.extensions or PLAIN_EXTENSIONS, examples=(), defaults=defaults, read=read_any)


def finetune_rows() -> dict[str, FinetuneTask]:
    """Task name -> row of every task the tab offers: the registered fine-tuning tasks that are ``in_app``, the
    built-in rows first (in ``BUILT_IN_ROWS``' order: the dropdown's), then the others by registration."""
    offered = {name: d for name, d in TRAINING_TASKS.items() if d.finetuning and d.in_app}
    rows = {name: row for name, row in BUILT_IN_ROWS.items() if name in offered}
    return rows | {name: plain_row(d) for name, d in offered.items() if name not in rows}


def task_row(name: str | None) -> FinetuneTask:
    """The row of ``name``; ValueError listing the tasks when there is none."""
    rows = finetune_rows()
    row = rows.get(name or "")
    if row is None:
        raise ValueError(f"unknown task {name!r}; choose one of: {', '.join(rows)}")
    return row


def task_choices() -> list[tuple[str, str]]:
    """(label, name) of every task, for the dropdown."""
    return [(row.label, row.name) for row in finetune_rows().values()]
