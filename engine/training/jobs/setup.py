"""``prepare_job``: a ``JobSpec`` -> a ready ``Trainer`` (new, or a resumed run), the one path that the
command lines, the app's worker and the benches take.

New pretraining: corpus -> split -> tokenizer -> pretraining datasets -> model (preset or
``init_from``). New fine-tuning: start model -> its tokenizer -> task features -> model with the
task's head (the start model's stored dtype is the last checkpoint's, ``with_final_dtype``). Resume: the run's own spec (``run.json``) and checkpoint -> the same data -> the trainer
state restored. Every trainer is handed its task object (``TaskDefinition.make``: the loop never looks a task
up by name) and gets the callbacks of the spec's ``report_to`` (``engine.training.loop.report_to``),
so command-line and app runs log alike. ``progress(message)`` reports each stage, and while a corpus is read a
count and an ETA (``StageProgress``) at least every few dozen documents; when it answers False the job was
cancelled meanwhile and ``prepare_job`` returns None.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
import time
from typing import Any, Callable, ContextManager, Sequence

from engine.checkpoints.weight_files import stored_float_dtype
from engine.data.features import FeatureDataset
from engine.model.config import BertConfig
from engine.model.families.registry import load_config
from engine.model.head_specs import HEADS
from engine.model.loaded_model import LoadedModel
from engine.text.segment_ids import uses_segment_ids
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop import distributed as dist
from engine.training.loop.callbacks import TrainerCallback
from engine.training.loop.config import TrainingConfig, final_dtype_of
from engine.training.runs.run_names import run_name
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.data.token_cache import CorpusCancelled, Progress as CorpusProgress
from engine.data.token_store import TokenStore
from engine.training.jobs.pretraining_data import (
    corpus_tokens, corpus_vocabulary, job_source, pretraining_data, same_vocabulary_everywhere,
)
from engine.training.tasks.job_documents import check_one_batch
from engine.training.tasks.start_model import check_heads, check_start_model
from engine.training.jobs.models import finetuning_model, load_start_model, pretraining_model
from engine.training.jobs.stage_progress import Clock, StageProgress
from engine.training.loop.report_to import report_callbacks
from engine.training.runs.resume_rules import RESUMABLE_FIELDS
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import read_spec, write_corpus, write_spec
from engine.training.runs.state import read_metrics
from engine.training.loop.resume import resume
from engine.training.loop.training_task import TrainData
from engine.training.loop.trainer import Trainer

Progress = Callable[[str], Any]     # answers False to cancel; anything else goes on


class Cancelled(Exception):
    """``progress`` answered False: the job was stopped while it was being prepared."""


@dataclass
class PreparedJob:
    """A trainer ready to train, with what its callers show about it."""

    trainer: Trainer
    spec: JobSpec                                                  # the whole spec (a resumed run's own)
    tokenizer: WordPieceTokenizer
    train_data: TrainData
    history: list[dict[str, Any]] = field(default_factory=list)   # metrics of a resumed run so far
    checkpoint: Path | None = None                                 # where a resumed run continues from

    @property
    def run(self) -> RunFolder:
        return RunFolder(self.trainer.run_dir)


def default_run_dir(task: str) -> str:
    """``runs/<task>-<yyyymmdd-hhmmss>`` (``run_name``)."""
    return str(Path("runs") / run_name(task))


def prepare_job(spec: JobSpec, progress: Progress | None = None, callbacks: Sequence[TrainerCallback] = (),
                lock: ContextManager[Any] | None = None, corpus_progress: CorpusProgress | None = None,
                clock: Clock = time.monotonic) -> PreparedJob | None:
    """Build the job's trainer; None if ``progress`` cancelled it. ValueError / FileNotFoundError say
    what is wrong with the spec or its data; nothing is written before they are checked.
    ``callbacks`` and ``lock`` go to the ``Trainer`` (``engine.training.loop.callbacks``).
    ``corpus_progress(characters read, total)`` follows the reading of a corpus that is tokenised
    (the command lines draw a bar with it); without it ``progress`` gets the stage's message with the MB read
    and an ETA (on ``clock``) at least every ``REPORT_EVERY_DOCUMENTS`` documents."""
    stages = StageProgress(progress or (lambda message: True), clock)
    hooks = dict(callbacks=callbacks, lock=lock)

    def step(message: str) -> None:
        if stages.stage(message) is False:
            raise Cancelled

    reading = corpus_progress or stages.reading     # the current stage's count and ETA (False cancels)

    try:
        if spec.resume_from is not None:
            return _resume(spec, step, hooks, reading)
        spec.validate()
        if not spec.definition.finetuning:
            return _new_pretraining(spec, step, hooks, reading)
        return _new_finetuning(spec, step, hooks)
    except (Cancelled, CorpusCancelled):
        return None


def _new_pretraining(spec: JobSpec, step: Callable[[str], None], hooks: dict[str, Any],
                     reading: CorpusProgress) -> PreparedJob:
    config = spec.training_config()
    source = job_source(spec)
    loaded = None
    if spec.init_from is not None:
        step(f"loading {spec.init_from}")
        loaded = load_start_model(spec)
        check_heads(loaded.config, config, spec.init_from)        # e.g. NSP on a family without it
    if spec.tokenizer is not None:
        tokenizer = WordPieceTokenizer.from_file(spec.tokenizer)
    elif loaded is not None:
        tokenizer = loaded.require_tokenizer("so give one with tokenizer")
    else:
        tokenizer = corpus_vocabulary(spec, source, config, step, reading)
    same_vocabulary_everywhere(tokenizer)
    step(f"tokenising {source.name} (once; later runs read the cache)")
    store = same_store_everywhere(corpus_tokens(spec, source, tokenizer, config, reading))
    train_data, eval_data = pretraining_data(spec, config, tokenizer, store)
    step(f"planning pretraining instances from {train_data.num_documents:,} documents")
    check_one_batch(train_data, config)
    step("building the model")
    model = pretraining_model(spec, config, tokenizer, loaded)
    run_dir = spec.run_dir or default_run_dir(config.task)
    trainer = Trainer(model, tokenizer, train_data, eval_data, config, run_dir, **_reporting(hooks, spec, run_dir),
                      task=spec.definition.make_task(config, spec.task_settings))
    _record(spec, trainer, tokenizer)
    return PreparedJob(trainer, spec, tokenizer, train_data)


def _new_finetuning(spec: JobSpec, step: Callable[[str], None], hooks: dict[str, Any]) -> PreparedJob:
    config = spec.training_config()
    step(f"loading {spec.model_source}")
    loaded = load_start_model(spec)
    config = with_final_dtype(config, loaded)
    tokenizer = loaded.require_tokenizer("so it cannot be fine-tuned")
    check_start_model(spec, config, loaded.config, tokenizer, str(spec.model_source))
    step(f"reading {spec.data or 'the corpus'}")
    definition = spec.definition
    head = definition.heads[0]
    known = loaded.config.id2label if HEADS[head].labelled and head in loaded.heads else None
    task = definition.make_task(config, spec.task_settings)     # holds the task's own settings
    train_data, eval_data, id2label = definition.data(spec, config, tokenizer, None, step, known,
                                                      settings=task.settings)
    as_the_model_reads(loaded.config, tokenizer, train_data, eval_data)
    step("building the model")
    model = finetuning_model(loaded, config.task, id2label, config.seed, step, task.heads(config))
    run_dir = spec.run_dir or default_run_dir(config.task)
    trainer = Trainer(model, loaded.tokenizer, train_data, eval_data, config, run_dir,
                      **_reporting(hooks, spec, run_dir), task=task)
    _record(spec, trainer, loaded.tokenizer)
    return PreparedJob(trainer, spec, loaded.tokenizer, train_data)


def _resume(spec: JobSpec, step: Callable[[str], None], hooks: dict[str, Any],
            reading: CorpusProgress) -> PreparedJob:
    job = resume_spec(spec.resume_from, spec.given_training(), spec.documents, spec.run_dir)
    if spec.report_to is not None:                      # given: changes the run's own (recorded below)
        job = job.replace(report_to=spec.report_to)
    checkpoint = Path(job.resume_from)
    config = job.training_config()
    step(f"resuming from {checkpoint.name}")
    tokenizer = WordPieceTokenizer.from_file(checkpoint)
    step("rebuilding the training data")
    definition = job.definition
    task = definition.make_task(config, job.task_settings)
    if not definition.finetuning:       # the same store, split (the run's seed) and datasets as the original run
        store = same_store_everywhere(corpus_tokens(job, job_source(job), tokenizer, config, reading))
        train_data, eval_data = pretraining_data(job, config, tokenizer, store)
    else:
        labelled = HEADS[definition.heads[0]].labelled
        model = load_config(checkpoint)
        train_data, eval_data, _ = definition.data(job, config, tokenizer, model.id2label if labelled else None, step,
                                                   settings=task.settings)
        as_the_model_reads(model, tokenizer, train_data, eval_data)
    changes = {name: getattr(config, name) for name in sorted(RESUMABLE_FIELDS)}
    trainer = resume(checkpoint, task, train_data, eval_data, run_dir=job.run_dir,
                     **_reporting(hooks, job, job.run_dir), **changes)
    folder = RunFolder(trainer.run_dir)
    if not folder.spec_path.exists():
        _record(job, trainer, None)
    elif read_spec(folder).get("report_to") != job.report_to and dist.is_main_process():
        write_spec(folder, {**read_spec(folder), "report_to": job.report_to})
    return PreparedJob(trainer, job, tokenizer, train_data, read_metrics(RunFolder(trainer.run_dir).metrics_path),
                       checkpoint)


def with_final_dtype(config: TrainingConfig, start: LoadedModel) -> TrainingConfig:
    """``config`` with ``final_dtype`` "auto" made the dtype ``start``'s weights file stores (its header: no data
    read), so a fine-tune's model-only last checkpoint is as large as its base (fp16 stays fp16); as it was otherwise."""
    if config.final_dtype != "auto":
        return config
    return config.replace(final_dtype=final_dtype_of(stored_float_dtype(start.path) if start.path else None))


def as_the_model_reads(model: BertConfig, tokenizer: WordPieceTokenizer, *datasets: Any) -> None:
    """Fine-tuning features (QA's too in ``qa_mlm``'s joint data) read as one segment when a model of ``model``
    takes no segment ids (``segment_ids.uses_segment_ids``: RoBERTa, XLM-R, DistilBERT, as transformers feeds them)."""
    if uses_segment_ids(model, tokenizer):
        return
    for data in datasets:
        for part in (data, getattr(data, "qa", None)):
            if isinstance(part, FeatureDataset):
                part.without_segment_ids()


def same_store_everywhere(store: TokenStore) -> TokenStore:
    """``store`` when every rank's token store has its content hash (ValueError naming both ranks and hashes
    otherwise: nodes with other corpus files, or caches made from them, would train on mixed data)."""
    dist.same_everywhere(store.content_hash, "token stores (content hashes)",
                         "give every node the same corpus file and settings")
    return store


def _reporting(hooks: dict[str, Any], spec: JobSpec, run_dir: str | Path) -> dict[str, Any]:
    """``hooks`` with the callbacks of ``spec.report_to`` added, writing to ``run_dir``'s ``logs/``."""
    return {**hooks, "callbacks": [*hooks["callbacks"], *report_callbacks(spec.report_to, RunFolder(run_dir).logs_dir)]}


def _record(spec: JobSpec, trainer: Trainer, tokenizer: WordPieceTokenizer | None) -> None:
    """Write the run's ``run.json`` (and its tokenizer, and its copy of given text) once, from the main process."""
    if not dist.is_main_process():
        return
    folder = RunFolder(trainer.run_dir)
    corpus_file = write_corpus(folder, spec.corpus_text, spec.corpus_format) if spec.corpus_text is not None else None
    write_spec(folder, spec.to_record(corpus_file))
    if tokenizer is not None:
        tokenizer.save(folder.tokenizer_dir)
