"""Tiny models with each task head (classify, tag, choose, next sentence), the `transformers` tokenizer of
the tiny vocabulary, and services that pin one model per head for the Heads tab's tests."""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertTokenizerFast

from conftest import tiny_config
from engine.model.loaded_model import LoadedModel
from engine.model.head_specs import HEADS
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer
from explorer.services import Services
from support.probing_helpers import make_services
from support.reference import randomize_

SENTIMENT = {0: "negative", 1: "neutral", 2: "positive"}
BIO = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
UPOS = {0: "DET", 1: "NOUN", 2: "VERB", 3: "ADP", 4: "PUNCT"}
# model key -> (head, id2label) pinned by head_services
PINNED = {"classifier": ("classifier", SENTIMENT), "tagger": ("token_classifier", BIO),
          "pos": ("token_classifier", UPOS), "chooser": ("multiple_choice", None)}


def head_model(head: str, seed: int = 0, id2label: dict[int, str] | None = None, scale: float = 0.3,
               **overrides) -> BertWithHeads:
    """A tiny model carrying ``head`` only, with random non-trivial weights (eval mode). A classifier head's
    weights are drawn wider (N(0, 1), bias 0), so its answers vary from token to token and input to input."""
    if id2label is not None:
        overrides["id2label"] = id2label
    torch.manual_seed(seed)
    model = randomize_(BertWithHeads(tiny_config(**overrides), heads=(head,)), seed, scale=scale).eval()
    if HEADS[head].hf_prefix == "classifier.":   # a classifier head (they share transformers' key)
        linear = getattr(model, head)
        with torch.no_grad():
            linear.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(seed))
            linear.bias.zero_()
    return model


def loaded_with(head: str, tokenizer: WordPieceTokenizer, seed: int = 0, id2label: dict[int, str] | None = None,
                **overrides) -> LoadedModel:
    """``head_model`` with ``tokenizer``, as the registry serves it."""
    model = head_model(head, seed, id2label, **overrides)
    return LoadedModel(model, tokenizer, model.config, f"tiny {head} model")


def hf_tokenizer(tokenizer: WordPieceTokenizer, directory: Path) -> BertTokenizerFast:
    """``transformers``' fast tokenizer reading the same files as ``tokenizer``."""
    tokenizer.save(directory)
    return BertTokenizerFast.from_pretrained(directory)


def head_services(tokenizer: WordPieceTokenizer, runs_root: Path | None = None) -> Services:
    """``make_services`` (``default``: MLM+NSP+QA, ``encoder``: no heads) plus one model per key of ``PINNED``."""
    services = make_services(tokenizer, runs_root)
    for seed, (key, (head, labels)) in enumerate(PINNED.items(), start=10):
        services.models.pin(key, loaded_with(head, tokenizer, seed, labels))
    return services
