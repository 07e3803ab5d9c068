"""One home per training task: a ``TaskDefinition`` says everything the rest of the code needs to know about a
task, and ``TRAINING_TASKS`` (name -> definition) is the one list of them, read by ``JobSpec``'s checks, ``task_for``
(the task object the job setup hands the trainer), the job setup, the command lines, the worker, the
Fine-tune tab and the benches.

Each task module defines its own definition next to its ``TrainingTask`` (e.g. ``TOKEN_CLASSIFICATION`` in
``engine.training.tasks.token_classification``); ``engine.training.tasks`` (the package) registers the built-in
ones, one line each. Adding a task is one module and one ``register`` line; nothing else names it.

This module imports nothing of the project (``JobSpec``, which the task modules import, reads it), and importing
it runs the package's ``__init__`` first, which registers the built-in tasks.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

# (config: TrainingConfig) -> TrainingTask
MakeTask = Callable[[Any], Any]
# (spec: JobSpec, config: TrainingConfig, tokenizer, id2label: dict | None, log, known: dict | None)
#   -> (training data, held-out data or None, id2label or None)
DataBuilder = Callable[..., tuple[Any, Any, Any]]
# (model, tokenizer, data: FeatureDataset, indices, device) -> list[ExamplePrediction]  (eval_examples)
Predictor = Callable[..., list]


@dataclass(frozen=True)
class TaskDefinition:
    """What one training task is: its name (``TrainingConfig.task``), the heads it needs, how to make its
    ``TrainingTask``, how its data is built, its command-line defaults, the metrics worth following, how it
    predicts held-out examples, and its own ``JobSpec`` fields.

    ``settings`` is a new task's own settings: a dataclass whose fields (with defaults) are the task's values
    in ``JobSpec.task_settings`` (recorded in ``run.json``), each one command-line flag ``--field-name`` (help:
    the field's ``metadata["help"]``) on the command line that offers the task, and what its Fine-tune row may
    set; its ``__post_init__`` checks them (``ValueError`` starting with the field's name). Read them as
    ``spec.settings``. Adding a task with settings is then still its module and one ``register`` line.

    ``spec_fields`` are the built-in tasks' older ``JobSpec`` fields of their own (their flags, the Fine-tune
    form's extra fields); they also pick their checks: ``doc_stride`` -> QA windows (``check_lengths``),
    ``mlm_corpus`` -> a masked-LM text is required, ``corpus`` -> without ``data`` its examples are built from
    a corpus.
    """

    name: str
    heads: tuple[str, ...]                      # the heads it needs; the first is the one it trains
    make: MakeTask                              # its TrainingTask for a TrainingConfig
    loss: str                                   # its loss metric; evaluation logs it as "eval_" + loss
    metrics: tuple[str, ...]                    # metrics worth following (train key; held-out "eval_" + key)
    shown: tuple[tuple[str, str], ...]          # (metric, format) the command line's progress bar shows
    finetuning: bool = True                     # starts from a trained model; False: pretraining
    data: DataBuilder | None = None             # fine-tuning features of a JobSpec (pretraining: the job's text)
    defaults: Mapping[str, Any] = field(default_factory=dict)   # command-line defaults (seq_len, batch_size)
    training: Mapping[str, Any] = field(default_factory=dict)   # TrainingConfig fields a new run of it sets
    predictor: Predictor | None = None          # "examples it gets wrong" (eval_examples); None: no table
    spec_fields: tuple[str, ...] = ()           # JobSpec fields of its own (see above)
    settings: type | None = None                # a dataclass of its own settings (see above)

    @property
    def eval_loss(self) -> str:
        """The held-out loss's key in an evaluation record."""
        return "eval_" + self.loss


TRAINING_TASKS: dict[str, TaskDefinition] = {}


def register(definition: TaskDefinition) -> TaskDefinition:
    """Add a task to ``TRAINING_TASKS`` (ValueError when its name is taken); returns it."""
    if definition.name in TRAINING_TASKS:
        raise ValueError(f"a task named {definition.name!r} is registered already")
    TRAINING_TASKS[definition.name] = definition
    return definition


@contextlib.contextmanager
def registered(definition: TaskDefinition) -> Iterator[TaskDefinition]:
    """``register`` for the duration of a ``with`` block (tests, experiments); removed afterwards."""
    register(definition)
    try:
        yield definition
    finally:
        TRAINING_TASKS.pop(definition.name, None)


def task_definition(name: str) -> TaskDefinition:
    """The definition of task ``name``; ValueError listing the tasks when there is none."""
    definition = TRAINING_TASKS.get(name) if isinstance(name, str) else None
    if definition is None:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TRAINING_TASKS)}")
    return definition


def finetuning_tasks() -> tuple[str, ...]:
    """The names of the fine-tuning tasks, in registration order."""
    return tuple(name for name, definition in TRAINING_TASKS.items() if definition.finetuning)


def default_keep_optimizer_state(name: str) -> str:
    """Which checkpoints of a new run of task ``name`` keep the optimizer state unless told (``TrainingConfig.
    keep_optimizer_state``): a fine-tune ends lean, "while-running" (once it finishes its last checkpoint keeps only
    the model: Hugging Face's ``save_only_model`` at the end); pretraining keeps "newest" (*Continue a run* with
    more steps works)."""
    return "while-running" if is_finetuning(name) else "newest"


def tasks_with_field(spec_field: str) -> tuple[str, ...]:
    """The tasks that read ``JobSpec`` field ``spec_field`` (for messages: "mlm_corpus is for task ...")."""
    return tuple(name for name, definition in TRAINING_TASKS.items() if spec_field in definition.spec_fields)


def is_finetuning(name: str) -> bool:
    """Whether ``name`` is a registered fine-tuning task (False for pretraining)."""
    definition = TRAINING_TASKS.get(name) if isinstance(name, str) else None
    return definition is not None and definition.finetuning
