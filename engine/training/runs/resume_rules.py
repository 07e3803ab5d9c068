"""What a resumed run may change: ``RESUMABLE_FIELDS``, the ``TrainingConfig`` fields a continued run may set
anew; everything else about a run (its data, model, tokenizer, the rest of its training settings, and its task's
own settings, such as pretraining's objective, mask mix and static masking) is fixed once it exists. Read by
``resume_spec``, ``engine.training.loop.resume``, the job setup and the command lines."""
from __future__ import annotations

# TrainingConfig fields a resumed run may change; the rest define the run and must match.
RESUMABLE_FIELDS = frozenset({"total_steps", "eval_every", "eval_batches", "checkpoint_every", "checkpoint_every_s",
                              "keep_last_checkpoints", "keep_optimizer_state", "final_dtype", "log_every", "device",
                              "precision"})


def check_resume_changes(changed: set[str] | list[str], describe: dict[str, str] | None = None) -> None:
    """Raise ``ValueError`` when a resumed run would change a setting outside ``RESUMABLE_FIELDS``.

    ``describe`` maps a field to the name the user typed (a command-line flag) for the message.
    """
    name = (describe or {}).get
    fixed = sorted(name(f, f) for f in set(changed) - RESUMABLE_FIELDS)
    if fixed:
        allowed = ", ".join(sorted(name(f, f) for f in RESUMABLE_FIELDS))
        raise ValueError(f"cannot change {', '.join(fixed)} when resuming a run; only {allowed} may change")
