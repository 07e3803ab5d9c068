"""``python -m engine.finetune``: fine-tune a BERT for extractive QA or sequence classification.

The same ``Trainer`` as pretraining (``engine.training.trainer``; the task is ``config.task``), the
same checkpoints, resume, Ctrl-C handling and torchrun support as ``engine.pretrain``.

* ``--task qa``: SQuAD v1.1-format JSON; question + context windows (``--seq-len`` 384,
  ``--doc-stride`` 128, ``--max-question-len`` 64) labelled with the answer's token span,
  [CLS] when a window does not hold it (``engine.data.qa_features``).
* ``--task qa_mlm``: QA as above, and every step also trains the masked-LM (+ NSP) heads and
  the encoder on a batch of ``--mlm-corpus`` text (``--mlm-seq-len`` 128, ``--mlm-batch-size``
  sequences, by default ``--batch-size``), so fill-mask does not degrade while the model learns
  SQuAD (``engine.training.tasks.qa_with_mlm``). A larger text batch than QA batch spends more of each
  step on masked-LM.
* ``--task classification``: a CSV (header ``text``, ``label``, optional ``text_pair``) or
  JSONL file; labels become ``id2label`` / ``label2id`` in config.json (``engine.data.classification``).

The model starts from ``--init-from`` (the bundled ``default``, a run's checkpoint or an HF
directory); the task's head is added freshly initialised when the model lacks it, and every
head it has is kept and saved (e.g. MLM + NSP + QA in one checkpoint). ``--freeze-encoder``
trains the heads and the pooler only.

Examples::

    python -m engine.finetune --task qa --data squad_train.json --eval-data squad_dev.json --steps 2000
    python -m engine.finetune --task qa_mlm --data squad_train.json --eval-data squad_dev.json \\
        --mlm-corpus wiki.jsonl --steps 2000
    python -m engine.finetune --task classification --data assets/examples/sentiment.csv --steps 60 \\
        --eval-fraction 0.2 --lr 1e-4
    python -m engine.finetune --resume runs/qa --steps 4000
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from engine.training import cli
from engine.training import distributed as dist
from engine.checkpoints.hf_format import LoadedModel, load
from engine.data.classification import build_classification_dataset, label_names, read_classification_file
from engine.model.config import BertConfig
from engine.data.features import FeatureDataset, split_held_out
from engine.model.heads import HEADS, BertWithHeads
from engine.pretrain import load_corpus
from engine.data.qa_features import build_qa_dataset, check_lengths, read_squad
from engine.training.run_setup import split_documents
from engine.training.tasks import build_datasets
from engine.training.tasks.qa_with_mlm import JointDataset
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.trainer import RESUMABLE_OVERRIDES, Trainer
from engine.training.config import TrainingConfig
from engine.training.state import read_training_state, resolve_checkpoint

# task -> (the head it trains, and may add fresh or replace; other heads it adds when the model lacks them)
TASK_HEADS = {"qa": ("qa",), "qa_mlm": ("qa", "mlm", "nsp"), "classification": ("classifier",)}
MLM_EVAL_FRACTION = 0.05     # qa_mlm: documents of --mlm-corpus held out for the MLM/NSP evaluation
Log = Callable[[str], None]


@dataclass
class FinetuneOptions:
    """Everything a fine-tuning run needs besides the TrainingConfig (whose ``task`` says which)."""

    training: TrainingConfig
    data: str
    eval_data: str | None = None
    eval_fraction: float = 0.0               # held out from --data when there is no --eval-data
    init_from: str = "default"
    doc_stride: int = 128
    max_question_len: int = 64
    max_examples: int | None = None          # only the first N questions / examples (of each file)
    mlm_corpus: str | None = None            # qa_mlm: text corpus for the masked-LM / NSP term
    mlm_seq_len: int = 128                   # qa_mlm: length of its pretraining sequences
    mlm_batch_size: int | None = None        # qa_mlm: pretraining sequences per step (None: the QA batch size)
    run_dir: str | None = None


def build_data(options: FinetuneOptions, tokenizer: WordPieceTokenizer, id2label: dict[int, str] | None = None,
               log: Log = lambda message: None) -> tuple[FeatureDataset, FeatureDataset | None, dict[int, str] | None]:
    """(training, held-out, id2label) features of the run; ``id2label`` (classification) comes from
    the labels of both files unless given (a resumed run keeps its model's)."""
    config, limit = options.training, options.max_examples
    qa = config.task in ("qa", "qa_mlm")

    def read(path: str) -> list:
        if qa:
            squad = read_squad(path)
            log(f"{path}: {squad.summary()}")
            if not squad.examples:
                raise ValueError(f"{path} has no usable questions ({squad.summary()})")
            return squad.examples[:limit]
        return read_classification_file(path)[:limit]

    examples = read(options.data)
    if options.eval_data is not None:
        train, held_out = examples, read(options.eval_data)
    else:   # QA: questions about one context stay on one side
        group = (lambda e: e.context) if qa else None
        train, held_out = split_held_out(examples, options.eval_fraction, config.seed, group)
    if not train:
        raise ValueError(f"{options.data}: nothing left to train on after holding out {len(held_out)} examples")
    if qa:
        def progress(done: int, total: int) -> None:
            if total > 10_000 and (done % 10_000 == 0 or done == total):
                log(f"building QA features: {done}/{total} questions")

        def features(items: list, shuffle: bool) -> FeatureDataset:
            return build_qa_dataset(items, tokenizer, config.max_seq_length, config.batch_size, options.doc_stride,
                                    options.max_question_len, config.seed, shuffle, progress)
        train_data, eval_data = features(train, True), features(held_out, False) if held_out else None
        if config.task == "qa_mlm":
            train_data, eval_data = with_pretraining(options, tokenizer, train_data, eval_data, log)
        return train_data, eval_data, None
    if id2label is None:
        id2label = label_names([e.label for e in train + held_out])
    if len(id2label) < 2:
        raise ValueError(f"{options.data}: classification needs at least two different labels, "
                         f"found only {', '.join(map(repr, id2label.values()))}")
    label2id = {name: i for i, name in id2label.items()}
    train_data = build_classification_dataset(train, tokenizer, label2id, config.max_seq_length, config.batch_size,
                                               config.seed)
    eval_data = build_classification_dataset(held_out, tokenizer, label2id, config.max_seq_length,
                                             config.batch_size, config.seed, shuffle=False) if held_out else None
    return train_data, eval_data, id2label


def with_pretraining(options: FinetuneOptions, tokenizer: WordPieceTokenizer, train: FeatureDataset,
                     held_out: FeatureDataset | None, log: Log = lambda message: None,
                     ) -> tuple[JointDataset, JointDataset | None]:
    """qa_mlm: the QA features paired with pretraining batches of ``options.mlm_corpus`` (a seeded
    ``MLM_EVAL_FRACTION`` of its documents held out, paired with the held-out features)."""
    config = options.training
    if not options.mlm_corpus:
        raise ValueError("task qa_mlm needs a text corpus for its masked-LM term (--mlm-corpus)")
    train_docs, eval_docs = split_documents(load_corpus(options.mlm_corpus), MLM_EVAL_FRACTION, config.seed,
                                            config.nsp)
    log(f"{options.mlm_corpus}: {len(train_docs)} documents for the masked-LM term, {len(eval_docs)} held out")
    text_config = config.replace(max_seq_length=options.mlm_seq_len,
                                 batch_size=options.mlm_batch_size or config.batch_size)
    text_train, text_eval = build_datasets(train_docs, eval_docs, tokenizer, text_config)
    joint_eval = JointDataset(held_out, text_eval) if held_out is not None and text_eval is not None else None
    return JointDataset(train, text_train), joint_eval


def build_model(loaded: LoadedModel, task: str, id2label: dict[int, str] | None = None, seed: int = 0,
                log: Log = lambda message: None) -> BertWithHeads:
    """``loaded``'s encoder and heads plus the task's head (freshly initialised when it lacks it, or
    when its classifier has other labels than ``id2label``). The pooler stays when NSP or
    classification needs it."""
    head, needed = TASK_HEADS[task][0], TASK_HEADS[task]
    heads = tuple(h for h in HEADS if h in loaded.heads or h in needed)
    config = loaded.config
    fresh = head not in loaded.heads
    if head == "classifier" and id2label is not None and config.id2label != id2label:
        if not fresh:
            log(f"replacing the classifier of {loaded.source} (labels {list(config.id2label.values())}) "
                f"with a new one for {list(id2label.values())}")
        fresh, config = True, config.replace(id2label=dict(id2label))
    torch.manual_seed(seed)
    model = BertWithHeads(config, heads=heads, add_pooling_layer="nsp" in heads or "classifier" in heads)
    ours = model.state_dict()
    skip = {"qa": "qa_outputs.", "classifier": "classifier."}[head] if fresh else None
    theirs = {k: v for k, v in loaded.model.state_dict().items()
              if k in ours and ours[k].shape == v.shape and not (skip and k.startswith(skip))}
    model.load_state_dict(theirs, strict=False)
    if fresh:
        log(f"added a freshly initialised {head} head to {loaded.source} (heads: {', '.join(heads)})")
    return model


def prepare_finetune(options: FinetuneOptions, resume: str | None = None, log: Log = lambda message: None) -> Trainer:
    """A ready ``Trainer``: a new run from ``options``, or ``resume`` (a run or checkpoint directory)
    continued with ``options.training``'s resumable fields (total_steps, intervals, device)."""
    config = options.training
    if resume is not None:
        checkpoint = resolve_checkpoint(resume)
        state = read_training_state(checkpoint)
        saved = TrainingConfig.from_dict(state["config"])
        if saved.task != config.task:
            raise ValueError(f"{checkpoint} is a {saved.task} run, not {config.task}")
        log(f"resuming {checkpoint} (step {state['step']})")
        options.training = saved          # the data are rebuilt exactly as the run made them
        id2label = BertConfig.load(checkpoint).id2label if saved.task == "classification" else None
        train_data, eval_data, _ = build_data(options, WordPieceTokenizer.from_file(checkpoint), id2label, log)
        overrides = {name: getattr(config, name) for name in sorted(RESUMABLE_OVERRIDES)
                     if getattr(config, name) != getattr(saved, name)}
        options.training = saved.replace(**overrides)
        return Trainer.resume(checkpoint, train_data, eval_data, run_dir=options.run_dir, **overrides)
    loaded = load(cli.model_source(options.init_from))
    if loaded.tokenizer is None:
        raise ValueError(f"{options.init_from} has no tokenizer (vocab.txt or tokenizer.json)")
    config.check_model(loaded.config)
    train_data, eval_data, id2label = build_data(options, loaded.tokenizer, None, log)
    model = build_model(loaded, config.task, id2label, config.seed, log)
    return Trainer(model, loaded.tokenizer, train_data, eval_data, config, options.run_dir or cli.default_run_dir())


# ---------------------------------------------------------------------------- command line
DEFAULTS: dict[str, Any] = dict(
    init_from="default", seq_len=None, batch_size=None, grad_accum=1, lr=5e-5, warmup=None, steps=1000,
    eval_every=200, eval_batches=20, checkpoint_every=500, keep_last=None, seed=0, device="auto", precision="auto",
    schedule="linear", eval_fraction=None, log_every=1, threads=0, doc_stride=128, max_question_len=64,
    mlm_seq_len=128, mlm_batch_size=None)
TASK_DEFAULTS = {"qa": dict(seq_len=384, batch_size=16), "qa_mlm": dict(seq_len=384, batch_size=16),
                 "classification": dict(seq_len=128, batch_size=32)}
HELP_DEFAULTS = dict(DEFAULTS, seq_len="384 qa / 128 classification", batch_size="16 qa / 32 classification")
FIXED_ON_RESUME = ("data", "eval_data", "eval_fraction", "init_from", "seq_len", "doc_stride", "max_question_len",
                   "max_examples", "batch_size", "grad_accum", "lr", "warmup", "schedule", "seed", "eval_batches",
                   "freeze_encoder", "mlm_corpus", "mlm_seq_len", "mlm_batch_size")


def build_parser() -> argparse.ArgumentParser:
    """The command line; every flag defaults to None (see DEFAULTS) so that --resume can fill it."""
    p = argparse.ArgumentParser(prog="python -m engine.finetune", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    add("--task", choices=list(TASK_HEADS), help="what to fine-tune for (required for a new run)")
    add("--data", metavar="FILE", help="training data: SQuAD JSON (qa) or CSV/JSONL (classification)")
    add("--eval-data", metavar="FILE", help="held-out data in the same format")
    add("--eval-fraction", type=float, help="without --eval-data: hold this fraction of --data out (default 0.1)")
    add("--init-from", metavar="MODEL_DIR",
        help="'default' (bundled, the default), a run or checkpoint directory, or an HF BERT directory")
    add("--doc-stride", type=int, help="qa: context tokens shared by consecutive windows (default 128)")
    add("--max-question-len", type=int, help="qa: questions are cut to this many tokens (default 64)")
    add("--max-examples", type=int, help="use only the first N questions / examples of each file")
    add("--mlm-corpus", metavar="FILE",
        help="qa_mlm: text (.txt/.md/.jsonl) whose masked-LM and NSP losses train beside QA's")
    add("--mlm-seq-len", type=int, help="qa_mlm: length of the masked-LM sequences (default 128)")
    add("--mlm-batch-size", type=int,
        help="qa_mlm: masked-LM sequences per micro-batch (default: --batch-size)")
    cli.add_training_arguments(p, HELP_DEFAULTS)
    return p


def options_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> FinetuneOptions:
    """Validated options; any bad value ends the program through ``parser.error`` (exit 2)."""
    cli.apply_resume(args, parser, FIXED_ON_RESUME)
    if args.task is None:
        parser.error("--task is required (qa, qa_mlm or classification)")
    if args.data is None:
        parser.error("--data is required")
    if args.task == "qa_mlm" and args.mlm_corpus is None:
        parser.error("--task qa_mlm needs --mlm-corpus (the text its masked-LM term trains on)")
    if args.resume is None and args.task != "qa_mlm" and any(
            value is not None for value in (args.mlm_corpus, args.mlm_seq_len, args.mlm_batch_size)):
        parser.error("--mlm-corpus, --mlm-seq-len and --mlm-batch-size are for --task qa_mlm")
    if args.eval_data is not None and args.eval_fraction:
        parser.error("give either --eval-data or --eval-fraction, not both")
    cli.apply_defaults(args, {**DEFAULTS, **TASK_DEFAULTS[args.task]}, parser)
    if args.eval_fraction is None:
        args.eval_fraction = 0.0 if args.eval_data is not None else 0.1
    for flag, path in (("--data", args.data), ("--eval-data", args.eval_data), ("--mlm-corpus", args.mlm_corpus)):
        if path is not None and not Path(path).is_file():
            parser.error(f"{flag}: no such file: {path}")
    if not 0.0 <= args.eval_fraction < 1.0:
        parser.error(f"--eval-fraction must be in [0, 1), got {args.eval_fraction}")
    if args.max_examples is not None and args.max_examples < 1:
        parser.error(f"--max-examples must be >= 1, got {args.max_examples}")
    if args.mlm_seq_len < 8:
        parser.error(f"--mlm-seq-len must be >= 8, got {args.mlm_seq_len}")
    if args.mlm_batch_size is not None and args.mlm_batch_size < 1:
        parser.error(f"--mlm-batch-size must be >= 1, got {args.mlm_batch_size}")
    if args.task in ("qa", "qa_mlm"):
        try:
            check_lengths(args.seq_len, args.doc_stride, args.max_question_len)
        except ValueError as exc:
            parser.error(str(exc).replace("max_seq_len", "--seq-len").replace("doc_stride", "--doc-stride")
                         .replace("max_question_len", "--max-question-len"))
    training = cli.training_config(args, parser, task=args.task, nsp=args.task == "qa_mlm")
    return FinetuneOptions(training, args.data, args.eval_data, args.eval_fraction, args.init_from, args.doc_stride,
                           args.max_question_len, args.max_examples, args.mlm_corpus, args.mlm_seq_len,
                           args.mlm_batch_size, args.run_dir)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; 0 finished, 1 diverged, 2 bad arguments or data, 130 interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)
    options = options_from_args(args, parser)

    def prepare(device: str, say: Log) -> Trainer:
        options.training = options.training.replace(device=device)
        options.run_dir = args.run_dir
        trainer = prepare_finetune(options, args.resume, say)
        if dist.is_main_process():
            cli.write_run_file(trainer.run_dir, {k: v for k, v in asdict(options).items()
                                                 if k not in ("training", "run_dir")} | {"task": options.training.task})
        return trainer

    def started(trainer: Trainer) -> str:
        config, data = trainer.config, trainer.train_data
        params = sum(p.numel() for p in trainer.model.parameters())
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        held_out = (f"{len(trainer.eval_data)} held-out features" if trainer.eval_data is not None
                    else "no held-out data")
        if config.task == "qa_mlm":
            held_out += (f", {len(data.pretraining.documents_token_ids)} documents for the masked-LM term "
                         f"(text batch {data.pretraining.batch_size})")
        labels = (f", labels {list(trainer.model.config.id2label.values())}" if config.task == "classification"
                  else "")
        return (f"run {trainer.run_dir}: {config.task} from {options.init_from} ({params / 1e6:.2f}M parameters, "
                f"{trainable / 1e6:.2f}M trained; heads {', '.join(trainer.model.heads)}{labels}), "
                f"{len(data)} training features from {len(set(data.example_index.tolist()))} examples, {held_out}, "
                f"device {trainer.device}, {dist.world_size()} process(es), global batch "
                f"{config.batch_size * config.gradient_accumulation_steps * dist.world_size()}"
                + (", encoder frozen" if config.freeze_encoder else ""))

    return cli.run_main(args, parser, options.training.device, prepare, started, "python -m engine.finetune")


if __name__ == "__main__":
    sys.exit(main())
