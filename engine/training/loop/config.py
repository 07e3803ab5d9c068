"""TrainingConfig: every setting of a training run (pretraining or fine-tuning), validated when it is made."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from engine.checks import is_finite_number, is_int
from engine.model.config import BertConfig
from engine.training.loop.optim import SCHEDULES

PRECISIONS = ("auto", "fp32", "bf16")
# which checkpoints keep the optimizer state: the newest one; the newest one until the run finishes (then none:
# Hugging Face's save_only_model at the end, a fine-tune's default); or every one
KEEP_OPTIMIZER_STATE = ("newest", "while-running", "all")
# the dtype of the weights in a run's last checkpoint when it keeps only the model ("auto": the start model's, set by
# the job setup for a fine-tune; float32 otherwise); every checkpoint that can resume keeps float32
FINAL_DTYPES = ("auto", "float16", "bfloat16", "float32")


def auto_device() -> str:
    """What ``auto`` means everywhere (training and the probing tabs): CUDA when torch sees a GPU, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class TrainingConfig:
    """Optimizer, schedule, data and bookkeeping settings of one run.

    ``batch_size`` is the micro-batch; one optimizer step sees ``batch_size *
    gradient_accumulation_steps`` sequences. Intervals count optimizer steps; 0 means
    never (the last step is always evaluated and checkpointed); ``checkpoint_every_s`` saves after that many
    seconds of training too (``engine.training.loop.checkpoint_policy``). ``warmup_steps``, when given,
    wins over ``warmup_ratio`` (a fraction of ``total_steps``). ``task`` names what is trained (a
    task of ``engine.training.tasks``: the ``JobSpec`` checks the name, and the ``Trainer`` is handed the task
    object, whose name must be this); ``mlm_probability``, ``whole_word_masking`` and ``nsp`` concern pretraining only
    (its objective, mask mix and static masking are the pretraining task's own settings, kept in ``run.json``:
    ``engine.training.tasks.pretraining_settings``).
    ``freeze_encoder`` trains the heads and the pooler only: the embeddings (with the MLM decoder weight tied
    to them) and the encoder layers keep their weights. ``keep_optimizer_state`` says which checkpoints keep the
    optimizer and scheduler state a resume needs (about twice the fp32 weights): "newest" (older ones stay models),
    "while-running" (the same until the run finishes; then its last checkpoint keeps only the model, so a finished
    run cannot continue: docs/design/training.md) or "all". ``final_dtype`` is the dtype of the floating weights in
    that last, model-only checkpoint: "float16", "bfloat16", "float32", or "auto" (the start model's stored dtype for a
    fine-tune, which ``prepare_job`` writes here when the run starts; float32 otherwise). Checkpoints that keep the
    optimizer state keep float32 weights, so a resume is exact.
    """

    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    warmup_steps: int | None = None
    warmup_ratio: float = 0.06
    total_steps: int = 1000
    schedule: str = "linear"                 # "linear" (the paper's) or "inverse_sqrt"
    max_grad_norm: float | None = 1.0        # None: no clipping (the norm is still reported)
    gradient_accumulation_steps: int = 1
    batch_size: int = 32
    max_seq_length: int = 128
    mlm_probability: float = 0.15
    whole_word_masking: bool = False
    nsp: bool = True
    eval_every: int = 100
    eval_batches: int = 20                   # 0: the whole held-out set
    checkpoint_every: int = 500
    checkpoint_every_s: float | None = 300.0  # also after this many seconds of training; 0 or None: by steps only
    keep_last_checkpoints: int | None = None  # None keeps every checkpoint
    keep_optimizer_state: str = "newest"     # "newest": older checkpoints lose optimizer/scheduler state;
                                             # "while-running": the last one too once the run finishes; "all"
    final_dtype: str = "auto"                # weights of a model-only last checkpoint: auto, float16, bfloat16, float32
    log_every: int = 1
    seed: int = 0
    device: str = "auto"                     # "auto" (cuda if available, else cpu), "cpu", "cuda", "cuda:1"
    precision: str = "auto"                  # "auto" (bf16 autocast on CUDA, fp32 on CPU), "fp32", "bf16"
    task: str = "pretraining"                # a name in engine.training.tasks.registry.TRAINING_TASKS (pretraining:
                                             # MLM + NSP; qa, qa_mlm, classification, ...: fine-tuning)
    freeze_encoder: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.adam_betas, list):
            self.adam_betas = tuple(self.adam_betas)
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first setting that cannot work."""
        _positive_number(self, "learning_rate")
        _positive_number(self, "adam_eps")
        _number_in(self, "weight_decay", 0.0, math.inf)
        _number_in(self, "warmup_ratio", 0.0, 1.0, high_open=True)
        _number_in(self, "mlm_probability", 0.0, 1.0, low_open=True, high_open=True)
        if (not isinstance(self.adam_betas, tuple) or len(self.adam_betas) != 2
                or not all(is_finite_number(b) and 0.0 <= b < 1.0 for b in self.adam_betas)):
            raise ValueError(f"adam_betas must be two numbers in [0, 1), got {self.adam_betas!r}")
        if self.max_grad_norm is not None:
            _positive_number(self, "max_grad_norm")
        for name in ("total_steps", "gradient_accumulation_steps", "batch_size", "log_every"):
            _integer(self, name, minimum=1)
        for name in ("eval_every", "eval_batches", "checkpoint_every", "seed"):
            _integer(self, name, minimum=0)
        _integer(self, "max_seq_length", minimum=8)
        if self.warmup_steps is not None:
            _integer(self, "warmup_steps", minimum=0)
            if self.warmup_steps > self.total_steps:
                raise ValueError(f"warmup_steps ({self.warmup_steps}) is more than total_steps ({self.total_steps})")
        if self.checkpoint_every_s is not None and not (is_finite_number(self.checkpoint_every_s)
                                                        and self.checkpoint_every_s >= 0):
            raise ValueError(f"checkpoint_every_s must be a number of seconds >= 0 (0: by steps only), "
                             f"got {self.checkpoint_every_s!r}")
        if self.keep_last_checkpoints is not None:
            _integer(self, "keep_last_checkpoints", minimum=1)
        if self.keep_optimizer_state not in KEEP_OPTIMIZER_STATE:
            raise ValueError(f"keep_optimizer_state must be one of {', '.join(KEEP_OPTIMIZER_STATE)}, "
                             f"got {self.keep_optimizer_state!r}")
        if self.final_dtype not in FINAL_DTYPES:
            raise ValueError(f"final_dtype must be one of {', '.join(FINAL_DTYPES)}, got {self.final_dtype!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}")
        if not isinstance(self.task, str) or not self.task:   # which tasks exist is the registry's (JobSpec checks)
            raise ValueError(f"task must be a task's name, got {self.task!r}")
        for name in ("whole_word_masking", "nsp", "freeze_encoder"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.device != "auto":
            try:
                torch.device(self.device)
            except (RuntimeError, TypeError):
                raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}") from None

    @property
    def resolved_warmup_steps(self) -> int:
        """Warmup in optimizer steps: ``warmup_steps``, else ``round(warmup_ratio * total_steps)``."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        return round(self.warmup_ratio * self.total_steps)

    def check_model(self, model_config: BertConfig) -> None:
        """Raise ``ValueError`` if the model cannot take sequences of ``max_seq_length``: its ``max_tokens``
        (``max_position_embeddings`` less the positions its family skips, RoBERTa's padding offset)."""
        limit = model_config.max_tokens
        if self.max_seq_length > limit:
            skipped = model_config.max_position_embeddings - limit
            less = f" less the {skipped} its family skips" if skipped else ""
            raise ValueError(f"max_seq_length ({self.max_seq_length}) is longer than the model's {limit} positions "
                             f"(max_position_embeddings {model_config.max_position_embeddings}{less})")

    def resolve_device(self) -> torch.device:
        """The device to train on; ``auto`` is CUDA when available, else the CPU."""
        if self.device == "auto":
            return torch.device(auto_device())
        device = torch.device(self.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r} was asked for but CUDA is not available here")
        return device

    def autocast_dtype(self, device: torch.device) -> torch.dtype | None:
        """bf16 for autocast, or None for plain fp32. ``auto``: bf16 on CUDA, fp32 elsewhere."""
        if self.precision == "fp32" or (self.precision == "auto" and device.type != "cuda"):
            return None
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            if self.precision == "bf16":
                raise ValueError("precision 'bf16' was asked for but this GPU does not support bfloat16")
            return None
        return torch.bfloat16

    def final_weights_dtype(self) -> torch.dtype:
        """The dtype a model-only last checkpoint stores its floating weights in (``final_dtype``; "auto" not set
        from a start model is float32)."""
        return torch.float32 if self.final_dtype == "auto" else getattr(torch, self.final_dtype)

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (JSON- and weights-only-safe)."""
        data = dataclasses.asdict(self)
        data["adam_betas"] = list(self.adam_betas)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainingConfig":
        """Build from ``to_dict`` output; unknown keys (from newer versions) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def replace(self, **changes: Any) -> "TrainingConfig":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)


def final_dtype_of(stored: torch.dtype | None) -> str:
    """The ``final_dtype`` that keeps a start model's stored floating dtype: "float16" or "bfloat16" for those,
    "float32" for anything else (float32, float64, or None: no floating weights)."""
    return {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(stored, "float32")


def _positive_number(config: TrainingConfig, name: str) -> None:
    value = getattr(config, name)
    if not is_finite_number(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _number_in(config: TrainingConfig, name: str, low: float, high: float, low_open: bool = False,
               high_open: bool = False) -> None:
    value = getattr(config, name)
    ok = (is_finite_number(value) and (value > low if low_open else value >= low)
          and (value < high if high_open else value <= high))
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")


def _integer(config: TrainingConfig, name: str, minimum: int) -> None:
    value = getattr(config, name)
    if not is_int(value) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
