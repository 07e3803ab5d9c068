"""The task functions the UI (and scripts) call: one per tab, each returning plain data.

Each function takes a loaded model (`engine.load(...)`) and user-level input, and returns
dataclasses, numpy arrays or Hugging Face pipeline-shaped dicts; none returns tensors.
"""
from __future__ import annotations

from engine.probes.attention.maps import (AttentionResult, CheckpointAttention, attention,
                                          attention_over_checkpoints)
from engine.model.loaded_model import LoadedModel
from engine.probes.representations.embeddings import EmbeddingsResult, embeddings
from engine.probes.representations.position_similarity import PositionSimilarity, embeddings_over_checkpoints
from engine.probes.heads.fill_mask import FillMaskResult, fill_mask, fill_mask_details
from engine.probes.heads.fill_mask_checkpoints import fill_mask_over_checkpoints
from engine.probes.attention.ablation import AblationResult, ablate_heads
from engine.probes.heads.qa import QAResult, answer, answer_details
from engine.text.token_explain import Explanation
# the task heads (the Heads tab): sequence classification, tagging, multiple choice, next sentence
from engine.probes.heads.choose import ChooseResult, choose
from engine.probes.heads.classify import ClassifyResult, classify, classify_details
from engine.probes.heads.next_sentence import NextSentenceResult, next_sentence
from engine.probes.heads.tag import TagResult, tag_details, tag_words
# which input tokens pushed a prediction up or down (the Why tab)
from engine.probes.attribution.methods import Attribution, attribute
from engine.probes.attention.neuron_view import NeuronView, neuron_view

__all__ = ["attention", "attention_over_checkpoints", "ablate_heads", "AttentionResult",
           "CheckpointAttention", "AblationResult",
           "embeddings", "embeddings_over_checkpoints", "EmbeddingsResult", "PositionSimilarity",
           "tokenize", "fill_mask", "fill_mask_details", "fill_mask_over_checkpoints", "answer",
           "answer_details", "Explanation", "FillMaskResult", "QAResult"]
__all__ += ["classify", "classify_details", "ClassifyResult", "tag_words", "tag_details", "TagResult", "choose",
            "ChooseResult", "next_sentence", "NextSentenceResult"]
__all__ += ["attribute", "Attribution", "neuron_view", "NeuronView"]


def tokenize(loaded: LoadedModel, text: str, text_pair: str | None = None, max_length: int | None = None) -> Explanation:
    """Pieces, ids, type ids, offsets and counts for the Tokenize tab (any family's tokenizer).

    ``max_length`` defaults to the model's usable length, ``config.max_tokens`` (its positions less RoBERTa's
    offset).
    """
    tokenizer = loaded.require_tokenizer()
    limit = loaded.config.max_tokens
    max_length = limit if max_length is None else max_length
    if max_length > limit:
        raise ValueError(f"max_length {max_length} is longer than this model's {limit} positions")
    return tokenizer.explain(text, text_pair, max_length=max_length)
