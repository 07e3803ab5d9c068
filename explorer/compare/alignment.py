"""What the Compare tab says about how the two models were lined up: by words when their tokenizers differ, and
layer by layer at the same relative depth when their depths differ (``engine.probes.comparison.compare``).

Sentences only, from the comparison's plain data; no tensor math here.
"""
from __future__ import annotations

import math

from engine.probes.comparison.cka import LayerGrid
from engine.probes.comparison.compare import ModelComparison
from explorer.compare import plots
from explorer.formatting import sig


def alignment_note(comparison: ModelComparison) -> str | None:
    """"Aligned by 7 words: the tokenizers differ (12 vs 9 pieces) …" when the models were compared by words;
    None when they read the text into the same tokens."""
    alignment = comparison.alignment
    if alignment is None:
        return None
    count = len(alignment.words)
    return (f"ℹ️ Aligned by **{count} word{'s' if count != 1 else ''}**: the tokenizers differ "
            f"({alignment.num_pieces_a} vs {alignment.num_pieces_b} pieces, special tokens included). A word's "
            "vector is the mean of its pieces' vectors (CKA runs over the words), attention is drawn between words "
            "(to a word: the sum over its pieces) and fillers are compared by the word they write (the "
            "probabilities of its pieces summed; a word a vocabulary cannot write as one piece has no rank there: "
            "—).")


def pair_names(pairs: list[tuple[int, int]]) -> list[str]:
    """"A layer 2 · B layer 4" for each (A's layer, B's layer) pair."""
    return [f"A layer {i} · B layer {j}" for i, j in pairs]


def depth_summary(result: LayerGrid, over: str) -> str:
    """One sentence on the layers matched by relative depth, for two models of different depths: the debiased CKA of
    ``result`` (a comparison on one input, or over the sentence set) ``over`` what ("over … (1,052 tokens …)")."""
    pairs, cka = result.layer_pairs, result.matched_cka
    finite = [i for i, v in enumerate(cka) if math.isfinite(float(v))]
    low = min(finite, key=lambda i: float(cka[i])) if finite else 0
    depth_a, depth_b = result.cka.shape[0] - 1, result.cka.shape[1] - 1
    name = plots.layer_names(depth_a + 1)[low]
    return (f"The models have different depths ({depth_a} and {depth_b} layers): layer i of A is matched with layer "
            f"round(i × {depth_b} / {depth_a}) of B. Representations {over}: debiased linear CKA {sig(float(cka[0]))} "
            f"at layer 0 (the embeddings' output), {sig(float(cka[-1]))} at the last layers; least alike at **A's "
            f"{name}** with B's layer {pairs[low][1]} ({sig(float(cka[low]))}); every layer pair is in the CKA "
            "heatmap.")
