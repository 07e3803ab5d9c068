"""Fine-tuning-step throughput: our BertWithHeads vs transformers' class of the same head, fp32 CPU.

One step, both sides: forward with labels (the head's loss), backward, ``torch.optim.AdamW.step()``,
``zero_grad(set_to_none=True)``. Both start from the same weights (ours exported with
``key_mapping.export_state`` and loaded strictly into theirs) and take the same batch: random ids
``[CLS] ... [SEP]`` with a few padded rows. Steps alternate between the two models, the order flipping
every round (``bench/timing.py``), so a drifting machine slows both alike. Tokens/s = tokens in the
batch / median step time; the ratio ours/transformers is printed last (higher is better; goal >= 1.0).

Heads: token classification (17 tags: UPOS), sequence classification (2 labels), multiple choice
(4 choices; tokens = B * C * S). Config: the bundled default model's (6 layers, hidden 384, 12 heads).

    python bench/finetune_throughput.py [--rounds 20] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import transformers  # noqa: E402

from bench.timing import paired_times  # noqa: E402
from engine.checkpoints.key_mapping import export_state  # noqa: E402
from engine.model.config import BertConfig  # noqa: E402
from engine.model.head_specs import HEADS  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from support.reference import hf_config  # noqa: E402

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "assets" / "default-model"
# head -> (transformers class, num_labels, batch, seq_len, choices)
CASES = {
    "token_classifier": (transformers.BertForTokenClassification, 17, 16, 96, 1),
    "classifier": (transformers.BertForSequenceClassification, 2, 16, 64, 1),
    "multiple_choice": (transformers.BertForMultipleChoice, 2, 8, 64, 4),
}


def batch_for(config: BertConfig, head: str, batch: int, seq_len: int, choices: int, labels: int) -> dict:
    """Random ids with [CLS]/[SEP], the last quarter of rows padded to half length, and the head's labels."""
    g = torch.Generator().manual_seed(0)
    shape = (batch, choices, seq_len) if head == "multiple_choice" else (batch, seq_len)
    ids = torch.randint(min(1000, config.vocab_size // 2), config.vocab_size, shape, generator=g)  # no special ids
    mask = torch.ones(shape, dtype=torch.long)
    ids[..., 0], ids[..., -1] = 101, 102
    mask[batch * 3 // 4:, ..., seq_len // 2:] = 0
    ids[mask == 0] = 0
    if head == "token_classifier":
        target = torch.randint(0, labels, shape, generator=g).masked_fill(mask == 0, -100)
    else:
        target = torch.randint(0, choices if head == "multiple_choice" else labels, (batch,), generator=g)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "labels": target}


def ours_step(model: BertWithHeads, head: str, batch: dict):
    names = {"token_classifier": "token_labels", "classifier": "class_labels", "multiple_choice": "choice_labels"}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    inputs = {k: v for k, v in batch.items() if k != "labels"}

    def step() -> None:
        out = model(**inputs, **{names[head]: batch["labels"]})
        getattr(out, head).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def theirs_step(model, batch: dict):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step() -> None:
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def run_case(head: str, rounds: int) -> tuple[float, float, float]:
    """(ours tokens/s, theirs tokens/s, median per-round ratio) for one head."""
    cls, labels, batch_size, seq_len, choices = CASES[head]
    config = BertConfig.load(DEFAULT_CONFIG).replace(id2label={i: f"L{i}" for i in range(labels)})
    torch.manual_seed(0)
    ours = BertWithHeads(config, heads=(head,)).train()
    theirs = cls(hf_config(config, attn_implementation="sdpa")).train()
    theirs.load_state_dict(export_state(ours.state_dict(), [HEADS[head].hf_class]), strict=True)
    batch = batch_for(config, head, batch_size, seq_len, choices, labels)
    t_ours, t_theirs = paired_times(ours_step(ours, head, batch), theirs_step(theirs, batch), rounds)
    tokens = batch["input_ids"].numel()
    ratio = statistics.median(b / a for a, b in zip(t_ours, t_theirs))
    return tokens / statistics.median(t_ours), tokens / statistics.median(t_theirs), ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    parser.add_argument("--heads", default=",".join(CASES))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ratios = []
    for head in args.heads.split(","):
        ours, theirs, paired = run_case(head, args.rounds)
        ratios.append(ours / theirs)
        print(f"{head:17s} ours {ours:8.0f} tokens/s   transformers {theirs:8.0f} tokens/s   "
              f"ratio {ours / theirs:.3f} (median of per-round ratios {paired:.3f})", flush=True)
    print("ratios ours/transformers: " + ", ".join(f"{r:.3f}" for r in ratios))


if __name__ == "__main__":
    main()
