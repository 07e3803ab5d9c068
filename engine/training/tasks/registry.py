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
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

# (config: TrainingConfig, settings: the task's settings dataclass or None) -> TrainingTask holding the settings
MakeTask = Callable[[Any, Any], Any]
# (spec: JobSpec, config: TrainingConfig, tokenizer, id2label: dict | None, log, known: dict | None, *, settings)
#   -> (training data, held-out data or None, id2label or None)
DataBuilder = Callable[..., tuple[Any, Any, Any]]
# (model, tokenizer, data: FeatureDataset, indices, device) -> list[ExamplePrediction]  (eval_examples)
Predictor = Callable[..., list]


@dataclass(frozen=True)
class TaskDefinition:
    """What one training task is: its name (``TrainingConfig.task``), the heads it needs, how to make its
    ``TrainingTask``, how its data is built, its command-line defaults, the metrics worth following, how it
    predicts held-out examples, and its own settings.

    ``settings`` is the task's own settings: a dataclass whose fields (with defaults) are the task's values in
    ``JobSpec.task_settings`` (recorded in ``run.json``), each one command-line flag ``--field-name`` (help: the
    field's ``metadata["help"]``) on the command line that offers the task, and one field of the Fine-tune tab's
    form. Its ``__post_init__`` checks each value alone (``ValueError`` starting with the field's name); checks
    that need the job may be methods: ``check_job(spec, config)`` (before any data is read) and
    ``check_tokenizer(config, tokenizer)`` (once the start model's tokenizer is known). ``make(config,
    settings)`` returns the ``TrainingTask`` holding them (``task.settings``) and the data builder gets them as
    ``settings=``, so its loss, forward, metrics and data read them from there. Adding a task with settings is
    still its module and one ``register`` line.

    ``corpus_examples``: without ``data`` its builder makes examples from the job's text (``corpus``,
    ``documents``), as multiple choice's next-sentence choices. ``in_app``: the Fine-tune tab offers it (False
    for a task whose settings name files on the server, as ``qa_mlm``'s text corpus). ``label`` and ``formats``
    are what the tab says of a task it has no row of its own for (``explorer.finetune.tasks``).
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
    settings: type | None = None                # a dataclass of its own settings (see above)
    corpus_examples: bool = False               # without data, examples come from the job's text (see above)
    in_app: bool = True                         # offered by the Fine-tune tab (see above)
    label: str = ""                             # the tab's name for it (default: its name)
    formats: str = ""                           # the data it accepts, in words, for the tab (Markdown)
    extensions: tuple[str, ...] = ()            # file endings an upload of its data may have (the tab's)

    @property
    def eval_loss(self) -> str:
        """The held-out loss's key in an evaluation record."""
        return "eval_" + self.loss

    def settings_of(self, given: Mapping[str, Any] | None) -> Any:
        """Its settings dataclass with ``given`` (field name -> value) and the others' defaults, or None for a
        task without settings; ``ValueError`` names an unknown or bad setting."""
        kind, given = self.settings, dict(given or {})
        if kind is None:
            if given:
                raise ValueError(f"task {self.name} has no settings of its own, got {', '.join(sorted(given))}")
            return None
        names = [f.name for f in dataclasses.fields(kind)]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"unknown setting(s) of task {self.name}: {', '.join(unknown)}; its settings: "
                             f"{', '.join(names)}")
        try:
            return kind(**given)
        except TypeError as exc:               # a value the dataclass cannot take at all
            raise ValueError(f"a setting of task {self.name} is not valid: {exc}") from None

    def make_task(self, config: Any, given: Mapping[str, Any] | None = None) -> Any:
        """The ``TrainingTask`` the loop runs for ``config``, holding its settings (``settings_of(given)``)."""
        return self.make(config, self.settings_of(given))


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


def is_finetuning(name: str) -> bool:
    """Whether ``name`` is a registered fine-tuning task (False for pretraining)."""
    definition = TRAINING_TASKS.get(name) if isinstance(name, str) else None
    return definition is not None and definition.finetuning
