"""CPU training step, fp32 vs bf16 autocast (``--precision bf16``), through the trainer's own step.

What one "step" is: ``Trainer.step`` on one pretraining micro-batch (forward with the MLM and
NSP heads, sparse MLM, backward, gradient clipping, AdamW, scheduler), exactly what
``python -m engine.pretrain`` runs each step; the only difference between the two sides is
``TrainingConfig.precision`` ("fp32" or "bf16").

What is compared: two trainers over copies of the same model (by default the bundled default
model, the one its last training passes started from), on the same batch (Shakespeare from the
built-in corpus, batch 32 x 128: the default model's recipe), timed alternately step by step
with the order flipped every round (``bench.timing.paired_times``), so a machine whose speed
drifts slows both alike. The ratio is fp32 time / bf16 time (higher: bf16 faster).

Accuracy check: before any step, both trainers evaluate the batch (``Trainer.evaluate``: dropout
off, the trainer's precision); the relative difference of their losses says what bf16 costs in
numbers (expect ~1e-3, not ~1e-6).

Whether bf16 pays off depends on the CPU: with AMX (Xeon Sapphire Rapids and later) or
AVX512-BF16 it runs natively; without them it is emulated and usually *slower* than fp32. The
CPU's flags are printed, which is why ``--precision auto`` stays fp32 on a CPU.

Usage: python bench/cpu_precision.py [--model default] [--rounds 8] [--threads T]
The last line gives the ratio bf16/fp32 of tokens/s.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.checkpoints.hf_format import load  # noqa: E402
from engine.text.builtin_corpus import builtin_corpus  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from engine.data.instance_plan import max_segment_tokens  # noqa: E402
from engine.data.pretraining import PretrainingDataset  # noqa: E402
from engine.data.token_store import TokenStore  # noqa: E402
from engine.text.tokenizer import WordPieceTokenizer  # noqa: E402
from engine.training.loop.trainer import Trainer  # noqa: E402
from engine.training.tasks import task_for  # noqa: E402
from engine.training.loop.config import TrainingConfig  # noqa: E402
from bench.timing import paired_times  # noqa: E402

CPU_FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f")


@dataclass
class PrecisionResult:
    """Median seconds per step of each side, tokens per step and the bf16 loss difference."""

    tokens: int
    t_fp32: float
    t_bf16: float
    loss_fp32: float
    loss_bf16: float
    paired_ratio: float          # median over rounds of t_fp32 / t_bf16 (a check on drift)

    @property
    def ratio(self) -> float:
        """Tokens/s bf16 / fp32 (higher: bf16 faster)."""
        return self.t_fp32 / self.t_bf16

    @property
    def relative_loss_difference(self) -> float:
        return abs(self.loss_bf16 - self.loss_fp32) / abs(self.loss_fp32)


def cpu_flags() -> list[str]:
    """Which of ``CPU_FLAGS`` this CPU reports (Linux /proc/cpuinfo; empty elsewhere)."""
    try:
        words = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return []
    return [flag for flag in CPU_FLAGS if flag in words]


def shakespeare_batches(tokenizer: WordPieceTokenizer, batch_size: int, seq_len: int, nsp: bool,
                        ) -> PretrainingDataset:
    """Pretraining batches of the built-in corpus (8 plays' scenes), built once for both sides."""
    store = TokenStore.from_texts(builtin_corpus("shakespeare", max_documents=8), tokenizer,
                                  max_segment_tokens(seq_len, nsp))
    return PretrainingDataset(store, tokenizer, seq_len, batch_size, nsp=nsp)


def make_trainer(model: BertWithHeads, tokenizer: WordPieceTokenizer, precision: str, data: PretrainingDataset,
                 run_dir: Path) -> Trainer:
    """A pretraining trainer on the CPU over ``model`` (taken as is) with the given precision; its
    held-out set is the training data's first batch, so ``evaluate`` scores the timed batch."""
    config = TrainingConfig(precision=precision, device="cpu", batch_size=data.batch_size,
                            max_seq_length=data.max_seq_length, nsp=data.nsp, total_steps=1000, warmup_steps=0,
                            eval_every=0, eval_batches=1, checkpoint_every=0)
    return Trainer(model, tokenizer, data, data, config, run_dir, task=task_for(config))


def batch_loss(trainer: Trainer) -> float:
    """The loss of the trainer's held-out batch (MLM, + NSP when trained), dropout off, its precision."""
    metrics = trainer.evaluate()
    return metrics["eval_mlm_loss"] + (metrics["eval_nsp_loss"] or 0.0)


def run_case(model: BertWithHeads, tokenizer: WordPieceTokenizer, batch_size: int = 32, seq_len: int = 128,
             rounds: int = 8, warmup: int = 2) -> PrecisionResult:
    """Time ``Trainer.step`` in fp32 and in bf16 on copies of ``model`` and the same batch."""
    data = shakespeare_batches(tokenizer, batch_size, seq_len, nsp="nsp" in model.heads)
    batch = data.batch(0, 0)
    with tempfile.TemporaryDirectory() as scratch:
        fp32 = make_trainer(copy.deepcopy(model), tokenizer, "fp32", data, Path(scratch) / "fp32")
        bf16 = make_trainer(copy.deepcopy(model), tokenizer, "bf16", data, Path(scratch) / "bf16")
        loss_fp32, loss_bf16 = batch_loss(fp32), batch_loss(bf16)
        t_fp32, t_bf16 = paired_times(lambda: fp32.step([batch]), lambda: bf16.step([batch]), rounds, warmup)
    return PrecisionResult(batch.num_tokens, statistics.median(t_fp32), statistics.median(t_bf16), loss_fp32,
                           loss_bf16, statistics.median(a / b for a, b in zip(t_fp32, t_bf16)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="'default', a model folder or a checkpoint")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=8, help="timed steps per side (after 2 warm-up steps)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load(args.model)
    if "mlm" not in loaded.heads:
        parser.error(f"{args.model} has no masked-LM head; a pretraining step needs one")
    flags = ", ".join(cpu_flags()) or "none of " + ", ".join(CPU_FLAGS)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; CPU flags: {flags}; model "
          f"{loaded.source}; step = Trainer.step, pretraining, batch {args.batch_size} x {args.seq_len}")
    r = run_case(loaded.model, loaded.tokenizer, args.batch_size, args.seq_len, args.rounds)
    print(f"fp32 {r.t_fp32 * 1e3:8.1f} ms/step {r.tokens / r.t_fp32:8.0f} tok/s | "
          f"bf16 {r.t_bf16 * 1e3:8.1f} ms/step {r.tokens / r.t_bf16:8.0f} tok/s | "
          f"median of per-round ratios {r.paired_ratio:.2f}")
    print(f"loss with dropout off: fp32 {r.loss_fp32:.5f}, bf16 {r.loss_bf16:.5f} "
          f"(relative difference {r.relative_loss_difference:.1e})")
    print(f"ratio bf16/fp32 (tokens/s): {r.ratio:.2f}")


if __name__ == "__main__":
    main()
