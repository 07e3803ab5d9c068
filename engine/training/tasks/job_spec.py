"""A training job: one spec for pretraining and every fine-tuning task, its checks, and the resume rules.

``JobSpec`` is what ``python -m engine.pretrain``, ``python -m engine.finetune``, the app's
training worker and the benches fill in; ``engine.training.jobs.setup.prepare_job`` turns it into
a ready ``Trainer``. What is trained is ``training.task`` (``TrainingConfig``; checked here against the
registered tasks, ``engine.training.tasks.registry``); the other fields say
where the model, the tokenizer and the data come from. ``run.json`` in the run folder is the spec
(``to_record``), so a resumed run rebuilds its data exactly as it first made them
(``resume_spec``): only ``resume_rules.RESUMABLE_FIELDS`` of the training settings may change. It lives with
the tasks because their data builders read it (``TaskDefinition.data``) and its checks are the tasks' own.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from engine.checks import is_int
from engine.data.corpus_sources import resolve_corpus
from engine.text.builtin_corpus import BUILTIN_CORPORA
from engine.text.documents import Document
from engine.training.loop.config import TrainingConfig
from engine.training.loop.report_to import check_report_to
from engine.training.runs.legacy import upgrade_spec_values
from engine.training.runs.records import Damaged
from engine.training.runs.resume_rules import check_resume_changes
from engine.training.runs.run_folder import SPEC_FILE, RunFolder
from engine.training.runs.spec_file import spec_record
from engine.training.runs.state import read_checkpoint_info, read_training_state
from engine.training.tasks.registry import TaskDefinition, task_definition

# Fields that are not part of what defines the run (where it goes; uploaded documents are counted, not kept;
# given text is kept as a file in the run folder, which run.json names).
_NOT_RECORDED = ("training", "documents", "corpus_text", "run_dir", "resume_from")
TEXT_FORMATS = ("txt", "jsonl")


@dataclass
class JobSpec:
    """Everything a training job needs besides the code: the model, the tokenizer, the data, the settings.

    Model: a fresh ``preset`` (with ``model_overrides`` and ``dropout``), or ``init_from`` (``default``,
    a run or checkpoint directory, a Hugging Face directory or hub id; fine-tuning always starts from
    one, ``default`` unless given). Pretraining text: ``documents`` (already read, not kept) win over
    ``corpus_text`` (text given as it is, pasted or uploaded, in ``corpus_format`` ``txt``: documents
    separated by blank lines, or ``jsonl``: one ``{"text": ...}`` per line; kept in the run folder as
    ``corpus.txt`` / ``corpus.jsonl`` so a resume reads the same text), which win over ``corpus`` (a
    built-in corpus name or a .txt/.md/.jsonl file); ``max_documents`` keeps the first N. ``tokenizer`` (a
    directory) or ``init_from``'s tokenizer, else a WordPiece vocabulary of ``vocab_size`` trained on
    the training documents. Fine-tuning data: ``data`` / ``eval_data`` files (SQuAD v1.1/v2.0 JSON for
    QA, CSV/JSONL for classification, CoNLL-U or ``word<TAB>tag`` for token classification, a
    ``context, choice0.., label`` CSV for multiple choice), each at most ``max_file_bytes`` when set
    (the app's upload cap); a task with ``corpus_examples`` (multiple choice) without ``data`` builds its
    examples from ``documents`` / ``corpus``.
    ``eval_fraction``: documents / examples held out when there is no ``eval_data`` (None: 0.05 for
    pretraining, 0.1 for fine-tuning). ``training`` may be a dict of ``TrainingConfig`` fields; with
    ``resume_from`` such a dict holds only the changes to the resumed run's settings.
    ``report_to``: ``none`` or ``tensorboard`` (``engine.training.loop.report_to``); None is ``none`` for a new run
    and the run's own choice (``run.json``) on resume, where a value given changes it. ``task_settings``: the
    values of the task's own settings (``TaskDefinition.settings``: QA's windows, multiple choice's number of
    choices, ``qa_mlm``'s text corpus) by field name; the others take their defaults. Every other field is
    job-wide: no field here belongs to one task.
    """

    training: TrainingConfig | dict[str, Any] = field(default_factory=dict)
    preset: str = "tiny"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    dropout: float | None = None
    init_from: str | None = None
    corpus: str = "shakespeare"
    documents: list[Document] | None = None
    corpus_text: str | None = None
    corpus_format: str = "txt"
    corpus_label: str | None = None
    max_documents: int | None = None
    dataset: str | None = None               # a Hugging Face dataset (name or save_to_disk folder): wins over corpus
    dataset_config: str | None = None
    dataset_split: str = "train"
    text_column: str = "text"                # of a dataset, .parquet or .arrow corpus
    eval_fraction: float | None = None
    short_seq_prob: float = 0.1
    tokenizer: str | None = None
    vocab_size: int = 8000
    min_frequency: int = 2
    lowercase: bool = True
    data: str | None = None
    eval_data: str | None = None
    max_examples: int | None = None
    max_file_bytes: int | None = None        # fine-tuning files larger than this are refused (None: no cap)
    run_dir: str | None = None
    resume_from: str | None = None
    report_to: str | None = None             # none | tensorboard; None: none, or the resumed run's own
    task_settings: dict[str, Any] = field(default_factory=dict)   # the task's own settings (TaskDefinition.settings)

    # ------------------------------------------------------------------ derived values
    def training_config(self) -> TrainingConfig:
        """The validated ``TrainingConfig`` (ValueError names the bad or unknown setting, or an unknown task)."""
        if isinstance(self.training, TrainingConfig):
            config = self.training
        else:
            names = {f.name for f in dataclasses.fields(TrainingConfig)}
            unknown = sorted(set(self.training) - names)
            if unknown:
                raise ValueError(f"unknown training setting(s): {', '.join(unknown)}")
            config = TrainingConfig(**self.training)
        task_definition(config.task)              # ValueError "unknown task ...; choose one of ..."
        return config

    def given_training(self) -> dict[str, Any]:
        """The training settings given explicitly (all of them for a ``TrainingConfig``)."""
        return self.training.to_dict() if isinstance(self.training, TrainingConfig) else dict(self.training)

    @property
    def task(self) -> str:
        return self.training_config().task

    @property
    def definition(self) -> TaskDefinition:
        """The registered ``TaskDefinition`` of ``task`` (``engine.training.tasks.registry``)."""
        return task_definition(self.task)

    @property
    def held_out_fraction(self) -> float:
        """``eval_fraction``, or its default: 0.05 of the documents (pretraining), 0.1 of the examples
        (fine-tuning without ``eval_data``), nothing when ``eval_data`` is given."""
        if self.eval_fraction is not None:
            return self.eval_fraction
        if not self.definition.finetuning:
            return 0.05
        return 0.0 if self.eval_data is not None else 0.1

    @property
    def model_source(self) -> str | None:
        """Where the model starts: ``init_from``, and ``default`` for fine-tuning when none is given."""
        return self.init_from if self.init_from is not None or not self.definition.finetuning else "default"

    @property
    def settings(self) -> Any:
        """The task's own settings (its ``TaskDefinition.settings`` dataclass, defaults filled in from
        ``task_settings``), or None for a task without; ``ValueError`` names a bad or unknown one."""
        return self.definition.settings_of(self.task_settings)

    def replace(self, **changes: Any) -> "JobSpec":
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ checks
    def validate(self, names: Mapping[str, str] | None = None) -> TrainingConfig:
        """Check what can be checked without reading data; the validated ``TrainingConfig``.

        ``names`` maps a field to what the user typed (a command-line flag) for the messages.
        """
        n = (lambda f: (names or {}).get(f, f))
        config = self.training_config()
        if self.report_to is not None:
            try:
                check_report_to(self.report_to)
            except ValueError as exc:
                raise ValueError(str(exc).replace("report_to", n("report_to"), 1)) from None
        if self.resume_from is not None:
            return config
        try:
            settings = self.settings               # the task's own settings: each checks itself
        except ValueError as exc:
            raise ValueError(_named(str(exc), n)) from None
        for name in ("max_documents", "max_examples"):
            value = getattr(self, name)
            if value is not None and (not is_int(value) or value < 1):
                raise ValueError(f"{n(name)} must be >= 1, got {value}")
        if self.eval_fraction is not None and not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"{n('eval_fraction')} must be in [0, 1), got {self.eval_fraction}")
        if not self.definition.finetuning:
            self._validate_pretraining(config, n)
        else:
            self._validate_finetuning(config, n)
        if hasattr(settings, "check_job"):         # the task's checks that need the job (QA's windows)
            try:
                settings.check_job(self, config)
            except ValueError as exc:
                raise ValueError(flagged(str(exc), n, settings)) from None
        return config

    def _validate_pretraining(self, config: TrainingConfig, n) -> None:
        from engine.model.config import preset as preset_config

        if self.vocab_size < 16:
            raise ValueError(f"{n('vocab_size')} must be at least 16, got {self.vocab_size}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"{n('dropout')} must be in [0, 1), got {self.dropout}")
        if self.corpus_text is not None:
            self._validate_text(n)
        elif self.documents is None and self.dataset is None:
            try:
                resolve_corpus(self.corpus)
            except ValueError as exc:
                raise ValueError(f"{n('corpus')}: no built-in corpus or file named {self.corpus!r} ({exc}); "
                                 f"built in: {', '.join(BUILTIN_CORPORA)}, or a file, folder or glob of "
                                 ".txt/.md/.jsonl/.parquet/.arrow files, or upload documents") from None
        if self.tokenizer is not None and not Path(self.tokenizer).exists():
            raise ValueError(f"{n('tokenizer')}: no such file or directory: {self.tokenizer}")
        fine_tuning = [name for name in ("data", "eval_data") if getattr(self, name)]
        if fine_tuning:
            raise ValueError(f"{', '.join(map(n, fine_tuning))} are for fine-tuning tasks, not pretraining")
        if self.init_from is None:
            overrides = {k: v for k, v in self.model_overrides.items() if k != "vocab_size"}
            config.check_model(preset_config(self.preset, **overrides))

    def _validate_text(self, n) -> None:
        if not isinstance(self.corpus_text, str):
            raise ValueError(f"{n('corpus_text')} must be text, got {type(self.corpus_text).__name__}")
        if self.corpus_format not in TEXT_FORMATS:
            raise ValueError(f"{n('corpus_format')} must be one of {', '.join(TEXT_FORMATS)}, got {self.corpus_format!r}")
        try:
            self.corpus_text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{n('corpus_text')} has a character that is not valid Unicode at position {exc.start} "
                             "(a lone surrogate); remove it or save the text as UTF-8") from None
        if not self.corpus_text.strip():
            raise ValueError(f"{n('corpus_text')} is empty; give some text to train on")

    def _validate_finetuning(self, config: TrainingConfig, n) -> None:
        from engine.data.data_files import check_size

        if self.data is None and not self.definition.corpus_examples:
            raise ValueError(f"{n('data')} is required")
        if self.data is None and self.documents is None and self.corpus not in BUILTIN_CORPORA and not Path(
                self.corpus).is_file():          # examples built from the job's text (multiple choice)
            raise ValueError(f"{n('corpus')}: no built-in corpus or file named {self.corpus!r} (built in: "
                             f"{', '.join(BUILTIN_CORPORA)}); or give {n('data')}, a file of the task's examples")
        if self.max_file_bytes is not None and (not is_int(self.max_file_bytes) or self.max_file_bytes < 1):
            raise ValueError(f"{n('max_file_bytes')} must be a positive number of bytes, got {self.max_file_bytes!r}")
        if self.eval_data is not None and self.data is None:
            raise ValueError(f"{n('eval_data')} needs {n('data')} in the same format")
        if self.eval_data is not None and self.eval_fraction:
            raise ValueError(f"give either {n('eval_data')} or {n('eval_fraction')}, not both")
        for name in ("data", "eval_data"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{n(name)}: no such file: {path}")
            if path is not None:
                check_size(path, self.max_file_bytes)

    # ------------------------------------------------------------------ run.json
    def to_record(self, corpus_file: str | None = None) -> dict[str, Any]:
        """What ``run.json`` keeps: every field but the training settings (the checkpoints hold
        those), where the run goes and uploaded documents (only their count and label). Given text
        (``corpus_text``) is not in it: ``corpus_file`` names the run folder's copy of it."""
        record = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _NOT_RECORDED}
        settings = self.settings
        if settings is None:                     # a task without settings of its own: run.json as it always was
            del record["task_settings"]
        else:                                    # every setting, defaults too: a resume rebuilds the same data
            record["task_settings"] = dataclasses.asdict(settings)
        record["task"] = self.task
        record["documents"] = len(self.documents) if self.documents is not None else None
        if self.documents is not None:
            record["corpus"] = self.corpus_label or "uploaded documents"
        elif self.corpus_text is not None:
            record["corpus"] = self.corpus_label or "given text"
            record["corpus_file"] = corpus_file
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any], training: TrainingConfig) -> "JobSpec":
        """The spec a ``run.json`` describes (unknown keys, from other versions, are ignored; an older record's
        task fields are read into ``task_settings``: ``runs.legacy``)."""
        names = {f.name for f in dataclasses.fields(cls)} - set(_NOT_RECORDED)
        values = {k: v for k, v in record.items() if k in names}
        own = task_definition(training.task).settings
        values = upgrade_spec_values(record, values,                  # the worker's and older versions' records
                                     [f.name for f in dataclasses.fields(own)] if own is not None else [])
        if values.get("tokenizer") is not None:
            values["tokenizer"] = str(values["tokenizer"])
        if not isinstance(values.get("task_settings", {}), dict):
            raise TypeError("task_settings must be an object of the task's settings")
        return cls(training=training, **values)


def resume_spec(source: str | Path, changes: Mapping[str, Any] | None = None,
                documents: list[Document] | None = None, run_dir: str | Path | None = None,
                names: Mapping[str, str] | None = None) -> JobSpec:
    """The whole spec of a run continued from ``source`` (a run or one of its checkpoints).

    Everything comes from the run (``run.json`` and the checkpoint's training settings); ``changes``
    may change only ``RESUMABLE_FIELDS`` (values equal to the run's are no change); ``documents``
    re-gives uploaded documents (they are not kept in the run; given text is, and is read from the
    run's copy); ``run_dir`` defaults to the run's own folder.
    """
    folder, checkpoint = RunFolder.locate(source)
    try:
        saved = TrainingConfig.from_dict(read_checkpoint_info(checkpoint)["config"])
    except (ValueError, KeyError, TypeError):     # the small record is damaged: read the full state
        saved = TrainingConfig.from_dict(read_training_state(checkpoint)["config"])
    changed = {k: v for k, v in dict(changes or {}).items() if saved.to_dict().get(k, object()) != _plain(v)}
    if "task" in changed:
        raise ValueError(f"{checkpoint} is a {saved.task} run, not {changed['task']}")
    check_resume_changes(set(changed), names)
    parsed = spec_record(folder)
    if isinstance(parsed, Damaged):
        raise ValueError(f"the run {folder.name} is damaged ({parsed.reason}), so it cannot continue exactly; "
                         "start a new run (its checkpoints still load for probing and as a start model)")
    record = parsed.record if parsed is not None else {}
    try:
        spec = JobSpec.from_record(record, saved.replace(**changed))
    except TypeError as exc:               # a field of the wrong kind: run.json was edited or damaged
        raise ValueError(f"the run {folder.name} is damaged ({SPEC_FILE} does not describe a job: {exc}), so "
                         "it cannot continue exactly; start a new run") from None
    if record.get("corpus_file") and documents is None:       # the text given at the start, kept in the run
        copy = folder.corpus_path(str(record["corpus_file"]))
        if not copy.is_file():
            raise FileNotFoundError(f"the run {folder.name} has lost its copy of the text it trains on "
                                    f"({copy.name}), so it cannot continue exactly; start a new run")
        spec = spec.replace(corpus=str(copy), corpus_format="jsonl" if copy.suffix == ".jsonl" else "txt")
    return spec.replace(resume_from=str(checkpoint), documents=documents,
                        run_dir=str(run_dir if run_dir is not None else folder.root))


def _named(message: str, n: Any) -> str:
    """A setting's message with its field name (the message's first word) as the user typed it (its flag)."""
    first, _, rest = message.partition(" ")
    return f"{n(first)} {rest}" if rest else message


def flagged(message: str, n: Any, settings: Any) -> str:
    """A task's check's message with each of its settings' names, and the sequence length (``max_seq_len``,
    ``max_seq_length``), as the user typed them (their flags)."""
    names = [f.name for f in dataclasses.fields(settings)] + ["max_seq_length"]
    message = re.sub(r"\bmax_seq_len\b", "max_seq_length", message)
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: n(m.group(1)), message)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
