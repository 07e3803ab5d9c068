"""``python -m engine.finetune``: fine-tune a BERT-family model (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA, ALBERT)
for extractive QA, sequence or token classification, or multiple choice.

The arguments become a ``JobSpec`` (``engine.training.tasks.job_spec``) and ``prepare_job`` makes the trainer:
the same ``Trainer`` as pretraining (the task is ``config.task``), the same checkpoints, resume,
Ctrl-C handling and torchrun support as ``engine.pretrain``.

* ``--task qa``: SQuAD v1.1-format JSON; question + context windows (``--seq-len`` 384,
  ``--doc-stride`` 128, ``--max-question-len`` 64) labelled with the answer's token span,
  the first token ([CLS], <s>) when a window does not hold it (``engine.data.qa_features``).
* ``--task qa_mlm``: QA as above, and every step also trains the masked-LM (+ NSP) heads and
  the encoder on a batch of ``--mlm-corpus`` text (``--mlm-seq-len`` 128, ``--mlm-batch-size``
  sequences, by default ``--batch-size``), so fill-mask does not degrade while the model learns
  SQuAD (``engine.training.tasks.qa_with_mlm``). A larger text batch than QA batch spends more of each
  step on masked-LM.
* ``--task classification``: a CSV (header ``text``, ``label``, optional ``text_pair``) or
  JSONL file; labels (names or ids) become ``id2label`` / ``label2id`` in config.json
  (``engine.data.classification``).
* ``--task token_classification`` (or ``token-classification``): a CoNLL-U file (its UPOS tags) or
  ``word<TAB>tag`` lines with a blank line between sentences; each word's first piece carries its
  tag (``engine.data.tagged_text``, ``engine.data.token_features``). BIO tags also get entity F1.
* ``--task multiple_choice`` (or ``multiple-choice``): a CSV with ``context``, ``choice0`` ..
  ``choiceN-1`` and ``label`` (``engine.data.multiple_choice``); without ``--data``, "which
  sentence comes next?" with ``--num-choices`` (4) choices built from ``--corpus`` (the built-in
  Shakespeare, or a .txt/.md/.jsonl file; ``engine.data.next_sentence_choice``).

The model starts from ``--init-from`` (the bundled ``default``, a run's checkpoint or an HF
directory of any family the engine reads); the task's head is added freshly initialised when the model lacks it,
and every head it has is kept and saved (e.g. MLM + NSP + QA in one checkpoint) in the family's own layout. A task
whose head the family lacks (NSP for a RoBERTa) is refused in one sentence before any data is read
(``engine.training.tasks.start_model``). ``--freeze-encoder`` trains the heads and the pooler only. A finished run's
last checkpoint keeps only the model, in the start model's dtype (the bundled model's float16; ``--final-dtype
float32`` keeps the trained weights unrounded); every checkpoint that can resume is float32.

Examples::

    python -m engine.finetune --task qa --data squad_train.json --eval-data squad_dev.json --steps 2000
    python -m engine.finetune --task qa_mlm --data squad_train.json --eval-data squad_dev.json \\
        --mlm-corpus wiki.jsonl --steps 2000
    python -m engine.finetune --task classification --data assets/examples/sentiment.csv --steps 60 \\
        --eval-fraction 0.2 --lr 1e-4
    python -m engine.finetune --task token_classification --data assets/examples/pos-ewt-sample.tsv \\
        --steps 300 --lr 1e-4
    python -m engine.finetune --task multiple_choice --data assets/examples/choices.csv --steps 100
    python -m engine.finetune --task multiple_choice --corpus shakespeare --max-documents 200 --steps 300
    python -m engine.finetune --resume runs/qa --steps 4000
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from engine.training.jobs import cli, task_flags, training_flags
from engine.training.loop import distributed as dist
from engine.model.head_specs import HEADS
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import PreparedJob
from engine.training.tasks.registry import TRAINING_TASKS, TaskDefinition, finetuning_tasks, task_definition

# ---------------------------------------------------------------------------- command line
DEFAULTS: dict[str, Any] = dict(
    init_from="default", seq_len=None, batch_size=None, grad_accum=1, lr=5e-5, warmup=None, steps=1000,
    eval_every=200, eval_batches=20, checkpoint_every=500, checkpoint_every_s=300.0, keep_last=None, seed=0,
    device="auto", precision="auto", schedule="linear", log_every=1, threads=0)


def per_task_default(key: str) -> str:
    """``--help``'s default for a flag each task sets (its ``TaskDefinition.defaults``), from the registry:
    ``384 qa, qa_mlm / 128 classification, token_classification, multiple_choice``."""
    by_value: dict[Any, list[str]] = {}
    for name in finetuning_tasks():
        by_value.setdefault(task_definition(name).defaults.get(key), []).append(name)
    return " / ".join(f"{value} {', '.join(names)}" for value, names in by_value.items())


def help_defaults() -> dict[str, Any]:
    """``DEFAULTS`` as ``--help`` shows them: the per-task ones (seq_len, batch_size) from the task registry."""
    return dict(DEFAULTS, seq_len=per_task_default("seq_len"), batch_size=per_task_default("batch_size"))
# JobSpec field -> its argparse dest, for the flags that are not TrainingConfig fields
JOB_ARGS = {name: name for name in ("data", "eval_data", "eval_fraction", "init_from", "max_examples", "corpus",
                                    "max_documents")}


def task_name(text: str) -> str:
    """``token-classification`` and ``token_classification`` both name the task ``token_classification``."""
    return text.strip().replace("-", "_")


def build_parser() -> argparse.ArgumentParser:
    """The command line; every flag defaults to None (see DEFAULTS) so that --resume can fill it."""
    p = argparse.ArgumentParser(prog="python -m engine.finetune", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    add("--task", type=task_name, choices=list(finetuning_tasks()),
        help="what to fine-tune for (required for a new run; '-' works for '_')")
    add("--data", metavar="FILE", help="training data: SQuAD JSON (qa), CSV/JSONL (classification), CoNLL-U or "
        "word<TAB>tag (token_classification), CSV (multiple_choice)")
    add("--eval-data", metavar="FILE", help="held-out data in the same format")
    add("--eval-fraction", type=float, help="without --eval-data: hold this fraction of --data out (default 0.1)")
    add("--init-from", metavar="MODEL_DIR",
        help="'default' (bundled, the default), a run or checkpoint directory, or a Hugging Face model directory "
        "(BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA or ALBERT)")
    add("--max-examples", type=int, help="use only the first N questions / examples of each file")
    add("--corpus", help="multiple_choice without --data: the text its next-sentence choices come from "
        "('shakespeare', built in, the default; or a .txt/.md/.jsonl file)")
    add("--max-documents", type=int, help="multiple_choice without --data: use only the first N documents")
    training_flags.add_training_arguments(p, help_defaults())
    task_flags.add_task_settings(p, offered())
    return p


def offered() -> list[TaskDefinition]:
    """The fine-tuning tasks' definitions, in registration order (their own settings are flags)."""
    return [TRAINING_TASKS[name] for name in finetuning_tasks()]


def spec_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> JobSpec:
    """The job the arguments describe; any bad value ends the program through ``parser.error`` (exit 2)."""
    if args.resume is not None:
        return training_flags.resumed_spec(args, parser, JOB_ARGS, {"task": args.task} if args.task is not None else {})
    if args.task is None:
        parser.error(f"--task is required ({', '.join(finetuning_tasks())})")
    definition = task_definition(args.task)
    training_flags.apply_defaults(args, {**DEFAULTS, **definition.defaults}, parser)
    training = training_flags.training_config(args, parser, task=args.task, **definition.training)
    return training_flags.validated(JobSpec(
        training, init_from=args.init_from, data=args.data, eval_data=args.eval_data,
        eval_fraction=args.eval_fraction, max_examples=args.max_examples, corpus=args.corpus or "shakespeare",
        max_documents=args.max_documents, run_dir=args.run_dir, report_to=args.report_to, task_settings=task_flags.task_settings(args, parser, definition, offered())),
        parser)


def describe(job: PreparedJob) -> str:
    """The line printed when training starts."""
    trainer, spec = job.trainer, job.spec
    config, data = trainer.config, trainer.train_data
    params = sum(p.numel() for p in trainer.model.parameters())
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    held_out = (f"{len(trainer.eval_data)} held-out features" if trainer.eval_data is not None
                else "no held-out data")
    definition = task_definition(config.task)
    if hasattr(data, "summary"):                 # a task's own data says more (qa_mlm: its masked-LM text)
        held_out += f", {data.summary}"
    labels = (f", labels {list(trainer.model.config.id2label.values())}"
              if HEADS[definition.heads[0]].labelled else "")
    if hasattr(data, "num_choices"):             # multiple choice
        labels = f", {data.num_choices} choices"
    return (f"run {trainer.run_dir}: {config.task} from {spec.model_source} ({params / 1e6:.2f}M parameters, "
            f"{trainable / 1e6:.2f}M trained; heads {', '.join(trainer.model.heads)}{labels}), "
            f"{len(data)} training features from {len(set(data.example_index.tolist()))} examples, {held_out}, "
            f"device {trainer.device}, {dist.world_size()} process(es), global batch "
            f"{config.batch_size * config.gradient_accumulation_steps * dist.world_size()}"
            + (", encoder frozen" if config.freeze_encoder else ""))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; 0 finished, 1 diverged, 2 bad arguments or data, 74 a disk fault (full or read-only:
    one sentence on stderr naming the folder), 130 interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return cli.run_main(args, parser, spec_from_args(args, parser), describe, "python -m engine.finetune")


if __name__ == "__main__":
    sys.exit(main())
