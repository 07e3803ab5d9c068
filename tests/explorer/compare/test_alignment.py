"""Compare tab with two models whose tokenizers differ (explorer/compare/alignment.py): the summary says how
many words the models were aligned by and how many pieces each read, the figures run over words and over layers
matched by relative depth, and a text whose words cannot be aligned is one sentence while the app keeps serving."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gradio as gr
import pytest
import transformers

from engine.checkpoints.hf_format import load
from engine.probes.comparison.compare import compare_models
from explorer.compare import alignment, tab
from explorer.services import Services
from support.saved_families import save_family_model
from support.hostile_helpers import call, expect_error
from support.probing_helpers import make_services, tab_app

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "the cat [MASK] on the mat ."
WORDS = ["the", "cat", "[MASK]", "on", "the", "mat", "."]


@pytest.fixture(scope="module")
def roberta_folder(tmp_path_factory):
    return save_family_model("roberta", tmp_path_factory.mktemp("roberta"), layers=3, positions=66,
                             norms_drawn=False)


@pytest.fixture(scope="module")
def services(tiny_tokenizer, roberta_folder) -> Services:
    """``default``: the tiny BERT (2 layers, WordPiece); ``roberta``: a 3-layer RoBERTa with byte-level BPE."""
    services = make_services(tiny_tokenizer)
    services.registry().pin("roberta", load(roberta_folder))
    return services


@pytest.fixture(scope="module")
def app(services) -> tuple[gr.Blocks, dict]:
    return tab_app(services, tab.build)


def test_the_summary_says_the_models_were_aligned_by_words(services, tiny_tokenizer, roberta_folder) -> None:
    summary, fillers, similarity, heatmap, pair = tab.predict(services, "default", "roberta", TEXT, 1, 0, 3)
    pieces_a = len(tiny_tokenizer.encode(TEXT).input_ids)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(roberta_folder)
    pieces_b = len(hf_tokenizer(TEXT.replace("[MASK]", hf_tokenizer.mask_token))["input_ids"])
    assert pieces_a != pieces_b
    assert f"· {len(WORDS)} words" in summary.splitlines()[0]
    assert (f"Aligned by **{len(WORDS)} words**: the tokenizers differ ({pieces_a} vs {pieces_b} pieces, special "
            "tokens included)") in summary
    assert "different depths (2 and 3 layers)" in summary and "Mask 1: A's top filler" in summary
    assert list(similarity.data[0].x) == ["A layer 0 · B layer 0", "A layer 1 · B layer 2", "A layer 2 · B layer 3"]
    assert list(heatmap.data[0].x) == ["layer 0 (embeddings)", "layer 1", "layer 2", "layer 3"]
    assert list(pair.layout.xaxis.ticktext) == WORDS and len(pair.data[0].z) == len(WORDS)
    assert set(fillers["mask"]) == {1} and not any(word.startswith(("Ġ", "▁")) for word in fillers["filler"])
    assert "—" in set(fillers["rank in B"]) | set(fillers["rank in A"])    # a word one vocabulary cannot write


def test_the_same_tokenizer_gets_no_alignment_note(services) -> None:
    summary = tab.predict(services, "default", "encoder", TEXT, 1, 0)[0]
    assert "Aligned by" not in summary and "tokens" in summary.splitlines()[0]
    comparison = compare_models(services.model("default"), services.model("roberta"), TEXT)
    assert alignment.alignment_note(comparison).startswith("ℹ️ Aligned by **7 words**")
    assert alignment.pair_names([(0, 0), (1, 2)]) == ["A layer 0 · B layer 0", "A layer 1 · B layer 2"]


def test_served_words_that_cannot_be_aligned_are_one_sentence(client) -> None:
    summary = client.predict("default", "roberta", TEXT, 1, 0, 3, api_name="/compare")[0]
    assert "Aligned by **7 words**" in summary
    expect_error(call(client, "default", "roberta", "the cat \u0301 sat", 1, 0, 3, api_name="/compare"),
                 "model A's tokenizer drops")
    expect_error(call(client, "default", "roberta", "the [CLS] cat", 1, 0, 3, api_name="/compare"),
                 r"model A reads '\[CLS\]' as a special token")
    assert "Aligned by" in client.predict("default", "roberta", "the cat sat", 1, 0, 3, api_name="/compare")[0]
