"""Each family's masked-LM forward: ours (``engine.load``) vs transformers' eager and SDPA attention, same weights.

For every family (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA base and small, ALBERT, ModernBERT, DeBERTa-v3) a
random base-size model is made by ``transformers``, saved with ``save_pretrained`` into a temporary folder and read
back three times: by
``engine.load`` and by the family's ``...ForMaskedLM`` class with ``attn_implementation="eager"`` and ``"sdpa"``.
The logits of the three must agree (max |diff| <= 1e-4, printed) before anything is timed. Then the three
forwards (fp32 CPU, eval, ``torch.inference_mode()``, 128 tokens, batch 1 and 8) are called in turn, the order
rotating every round after a warm-up, and each one's median is taken: a machine whose speed drifts slows all
three alike. The table gives ms per forward and the ratios ours/eager and ours/sdpa (lower is faster; the goal
is ours/eager <= 1.0); the last line repeats the ratios ours/eager.
Sizes: 12 layers (DistilBERT 6), hidden 768, 12 heads, intermediate 3072, vocabulary 30522, except XLM-R's
50,000 (its real 250,002 would cost 770 MB a copy and the decoder would dominate the time); ELECTRA base has
E = H = 768, ELECTRA-small E 128 / H 256 / 4 heads / intermediate 1024; ALBERT E 128, one group of shared layers;
ModernBERT-base's GeGLU of 1,152 with a 128-token window (every third layer global); DeBERTa-v3-base's layout (256
relative-position buckets shared by the layers, no absolute positions).
Usage: python bench/families.py [--quick] [--threads N] [--families bert,albert] [--rounds-scale X]
"""
from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import load  # noqa: E402

FAMILIES = ("bert", "roberta", "xlm-roberta", "distilbert", "electra", "electra-small", "albert", "modernbert",
            "deberta-v3")
AGREEMENT = 1e-4          # max |diff| of the logits allowed before timing
NO_SDPA = ("deberta-v3",)  # transformers has no SDPA attention for these: their sdpa columns are "—"
ROUNDS = {1: 20, 8: 6}    # timing rounds per batch size (each round calls all three models once)


@dataclass(frozen=True)
class Shape:
    """The sizes every family is built at (a family changes some: see ``hf_model``)."""

    layers: int = 12
    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    vocab: int = 30522
    xlmr_vocab: int = 50_000      # XLM-R's own is 250,002: too big for this machine's memory and time
    embedding: int = 128          # E of ALBERT and ELECTRA-small
    positions: int = 514
    tokens: int = 128


BASE = Shape()


@dataclass
class Row:
    """One family at one batch size: median seconds per forward of each side and the logits' max |diff|."""

    family: str
    batch: int
    ours: float
    eager: float
    sdpa: float
    diff_eager: float
    diff_sdpa: float

    @property
    def ratio_eager(self) -> float:
        return self.ours / self.eager

    @property
    def ratio_sdpa(self) -> float:
        return self.ours / self.sdpa


def hf_model(family: str, shape: Shape = BASE) -> torch.nn.Module:
    """A randomly initialised transformers ``...ForMaskedLM`` of ``family`` at ``shape`` (no dropout, eval)."""
    import transformers as tf

    common = dict(hidden_size=shape.hidden, num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                  intermediate_size=shape.intermediate, vocab_size=shape.vocab,
                  max_position_embeddings=shape.positions, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    if family == "bert":
        model = tf.BertForMaskedLM(tf.BertConfig(**common))
    elif family == "roberta":
        model = tf.RobertaForMaskedLM(tf.RobertaConfig(**common))
    elif family == "xlm-roberta":
        model = tf.XLMRobertaForMaskedLM(tf.XLMRobertaConfig(**{**common, "vocab_size": shape.xlmr_vocab}))
    elif family == "distilbert":
        model = tf.DistilBertForMaskedLM(tf.DistilBertConfig(
            vocab_size=shape.vocab, dim=shape.hidden, n_layers=max(1, shape.layers // 2), n_heads=shape.heads,
            hidden_dim=shape.intermediate, max_position_embeddings=shape.positions, dropout=0.0,
            attention_dropout=0.0))
    elif family == "electra":
        model = tf.ElectraForMaskedLM(tf.ElectraConfig(**common, embedding_size=shape.hidden))
    elif family == "electra-small":
        small = dict(hidden_size=shape.hidden // 3, num_attention_heads=shape.heads // 3,
                     intermediate_size=shape.intermediate // 3, embedding_size=shape.embedding)
        model = tf.ElectraForMaskedLM(tf.ElectraConfig(**{**common, **small}))
    elif family == "albert":
        model = tf.AlbertForMaskedLM(tf.AlbertConfig(**common, embedding_size=shape.embedding,
                                                     num_hidden_groups=1, inner_group_num=1))
    elif family == "modernbert":          # its base shape: GeGLU of 1152, a window of 128, every third layer global
        model = tf.ModernBertForMaskedLM(tf.ModernBertConfig(
            vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads, intermediate_size=1152, max_position_embeddings=shape.positions,
            pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2))
    elif family == "deberta-v3":          # v3-base's layout: 256 relative buckets, no absolute positions
        model = tf.DebertaV2ForMaskedLM(tf.DebertaV2Config(
            **common, relative_attention=True, position_buckets=min(256, shape.positions), max_relative_positions=-1,
            pos_att_type=["p2c", "c2p"], position_biased_input=False, norm_rel_ebd="layer_norm", share_att_key=True,
            type_vocab_size=0))
    else:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    return model.eval()


def three_models(family: str, shape: Shape, folder: Path) -> tuple[torch.nn.Module, ...]:
    """(ours, transformers eager, transformers sdpa or None: ``NO_SDPA``), all read from one ``save_pretrained``
    folder."""
    torch.manual_seed(0)
    made = hf_model(family, shape)
    made.save_pretrained(folder)
    cls = type(made)
    del made
    ours = load(folder).model.eval()
    eager = cls.from_pretrained(folder, attn_implementation="eager").eval()
    sdpa = None if family in NO_SDPA else cls.from_pretrained(folder, attn_implementation="sdpa").eval()
    return ours, eager, sdpa


def forwards(ours, eager, sdpa, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    """The three masked-LM forwards on ``ids`` (B, S) and ``mask`` (B, S), each returning logits (B, S, V)."""
    fns = {"ours": lambda: ours(ids, mask, compute=("mlm",)).mlm.logits,
           "eager": lambda: eager(input_ids=ids, attention_mask=mask).logits}
    if sdpa is not None:
        fns["sdpa"] = lambda: sdpa(input_ids=ids, attention_mask=mask).logits
    return fns


def rotating_times(fns: dict[str, Callable[[], object]], rounds: int, warmup: int = 2) -> dict[str, list[float]]:
    """Seconds per call of each function, after ``warmup`` calls of each; round i starts with the i-th function
    (mod their number), so each goes first, second and last equally often."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def measure(family: str, shape: Shape, batches: dict[int, int], folder: Path, warmup: int = 2) -> list[Row]:
    """One ``Row`` per batch size (``batches``: batch -> rounds); raises ``AssertionError`` when the logits of
    ours and transformers' differ by more than ``AGREEMENT``."""
    ours, eager, sdpa = three_models(family, shape, folder)
    pad = ours.config.pad_token_id or 0
    rows = []
    generator = torch.Generator().manual_seed(1)
    for batch, rounds in batches.items():
        vocab = ours.config.vocab_size
        ids = torch.randint(5, vocab, (batch, shape.tokens), generator=generator)   # (B, S)
        ids[ids == pad] = pad + 1
        mask = torch.ones_like(ids)                                                   # (B, S)
        with torch.inference_mode():
            fns = forwards(ours, eager, sdpa, ids, mask)
            mine = fns["ours"]()
            diffs = [float((mine - fns[name]()).abs().max()) if name in fns else math.nan
                     for name in ("eager", "sdpa")]
            if max(d for d in diffs if not math.isnan(d)) > AGREEMENT:
                raise AssertionError(f"{family} b={batch}: logits differ from transformers' by {max(diffs):.1e} "
                                     f"(eager, sdpa: {diffs}), more than {AGREEMENT}")
            times = rotating_times(fns, rounds, warmup)
        rows.append(Row(family, batch, *(statistics.median(times[n]) if n in times else math.nan
                                         for n in ("ours", "eager", "sdpa")), *diffs))
    del ours, eager, sdpa
    gc.collect()
    return rows


def table(rows: list[Row]) -> list[str]:
    """The Markdown table, one line a row, then a line of the ratios ours/eager."""
    lines = ["| family | batch | ours ms | transformers eager ms | ratio ours/eager | transformers sdpa ms | "
             "ratio ours/sdpa | max abs diff (eager, sdpa) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        no_sdpa = math.isnan(r.sdpa)
        lines.append(f"| {r.family} | {r.batch} | {r.ours * 1e3:.1f} | {r.eager * 1e3:.1f} | "
                     f"**{r.ratio_eager:.2f}** | {'—' if no_sdpa else f'{r.sdpa * 1e3:.1f}'} | "
                     f"{'—' if no_sdpa else f'{r.ratio_sdpa:.2f}'} | "
                     f"{r.diff_eager:.1e}, {'—' if no_sdpa else f'{r.diff_sdpa:.1e}'} |")
    lines.append("ratio ours/eager: " + ", ".join(f"{r.family} b={r.batch} {r.ratio_eager:.3f}" for r in rows))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batch 1 only, half the rounds")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, of {', '.join(FAMILIES)}")
    parser.add_argument("--rounds-scale", type=float, default=1.0, help="multiply every batch size's rounds")
    args = parser.parse_args()
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}")
    torch.set_num_threads(args.threads)
    batches = {1: ROUNDS[1] // 2} if args.quick else dict(ROUNDS)
    batches = {b: max(3, int(r * args.rounds_scale)) for b, r in batches.items()}
    import transformers

    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} threads, "
          f"fp32 CPU, {BASE.tokens} tokens, rounds {batches}")
    rows = []
    for family in families:
        with tempfile.TemporaryDirectory(prefix=f"bench-{family}-") as folder:
            found = measure(family, BASE, batches, Path(folder))
        for r in found:
            print(f"{r.family:13s} b={r.batch}: ours {r.ours * 1e3:8.1f} ms  eager {r.eager * 1e3:8.1f} ms  "
                  f"sdpa {r.sdpa * 1e3:8.1f} ms  ours/eager {r.ratio_eager:.3f}  ours/sdpa {r.ratio_sdpa:.3f}  "
                  f"(max |diff| {r.diff_eager:.1e}, {r.diff_sdpa:.1e})", flush=True)
        rows += found
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
