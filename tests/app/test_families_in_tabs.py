"""Every tab with every family (docs/design/families.md), through the served app's API as a user's client
meets it: a RoBERTa, an XLM-R, a DistilBERT, an ELECTRA, an ALBERT, a ModernBERT and a DeBERTa-v3, each saved by ``transformers`` beside its
own kind of tokenizer in an allowed models folder, load through the Load box, and each probing endpoint answers
(the Tokenize pieces shown readably, the Embeddings breakdown as the family builds it, Attention, the neuron view,
Fill-mask with ``[MASK]`` or the model's own mask token, Why, Syntax, QA on a QA model, Compare across
tokenizers); what a family's model lacks (a head) is one sentence naming it."""
from __future__ import annotations

import os
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from gradio_client import Client

from support.app_helpers import serve
from support.saved_families import FAMILIES, save_family_model
from support.probing_helpers import make_services
from explorer.models.registry import ModelRegistry

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def client(tiny_tokenizer, tmp_path_factory):
    import app

    root = tmp_path_factory.mktemp("models")
    for family in FAMILIES:
        save_family_model(family, root / family)
    save_family_model("roberta", root / "roberta-qa", "ForQuestionAnswering")
    save_family_model("distilbert", root / "distilbert-qa", "ForQuestionAnswering")
    save_family_model("modernbert", root / "modernbert-qa", "ForQuestionAnswering")
    save_family_model("deberta-v2", root / "deberta-v2-qa", "ForQuestionAnswering")
    services = make_services(tiny_tokenizer)
    default = services.models.get("default")
    services.models = ModelRegistry(allowed_dirs=(root,), default_dir=None)
    services.models.pin("default", default)
    with serve(app.create_app(services)) as served:
        yield served, root


def load(client: Client, folder) -> str:
    """The Load box: type the folder, get the picker's key for it and the model's description."""
    picker, description = client.predict(source_text=str(folder), api_name="/load_model")
    return picker["value"], description


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_probing_tab_answers_for_each_family(client, family):
    client, root = client
    key, description = load(client, root / family)
    name = {"roberta": "RoBERTa", "xlm-roberta": "XLM-R", "distilbert": "DistilBERT", "electra": "ELECTRA",
            "albert": "ALBERT", "modernbert": "ModernBERT", "deberta-v2": "DeBERTa"}[family]
    assert name in description

    pieces = client.predict(model_key=key, text=TEXT, text_pair="", api_name="/tokenize")[0]
    shown = re.sub(r' title="[^"]*"', "", pieces)          # what the page draws (the hover text names the piece)
    if family in ("roberta", "xlm-roberta", "albert", "modernbert", "deberta-v2"):
        assert "▁" in shown                                # a word start shown with the one visible mark
    assert "Ġ" not in shown

    summary = client.predict(model_key=key, text=TEXT, api_name="/embeddings")[0]
    assert "equals the model's own embedding output" in summary
    norms = summary.split("Mean norms:")[1].split("\n")[0]
    assert ("segment" in norms) == (family not in ("distilbert", "modernbert", "deberta-v2"))
    assert ("position" in norms) == (family not in ("modernbert", "deberta-v2"))  # positions inside attention
    assert ("projects the output to the hidden size 32" in summary) == (family in ("electra", "albert"))

    maps = client.predict(model_key=key, text=TEXT, api_name="/attention")[0]
    assert maps["num_layers"] == (3 if family == "modernbert" else 2) and not any("Ġ" in t for t in maps["tokens"])
    neuron = client.predict(model_key=key, text=TEXT, api_name="/neuron_view")
    assert neuron["tokens"] == maps["tokens"][:len(neuron["tokens"])]

    typed = client.predict(model_key=key, text="The capital of France is [MASK].", api_name="/fill_mask")
    assert typed[0]["type"] == "plotly"
    why = client.predict(model_key=key, text="The capital of France is [MASK].", api_name="/attribute")[0]
    assert why.startswith("**Why ")

    syntax = client.predict(model_key=key, sentences=20, api_name="/syntax_heads")[0]
    assert "sentences" in syntax
    compare = client.predict(model_a="default", model_b=key, text=TEXT, api_name="/compare")[0]
    assert "linear cka" in compare.lower()

    with pytest.raises(Exception, match="has no next sentence"):
        client.predict(model_key=key, sentence_a="The cat sat.", sentence_b="It slept.", api_name="/next_sentence")


@pytest.mark.parametrize("family", ["roberta-qa", "distilbert-qa", "modernbert-qa", "deberta-v2-qa"])
def test_question_answering_on_a_family_qa_model(client, family):
    client, root = client
    key, _ = load(client, root / family)
    answer = client.predict(model_key=key, question="What is the capital?", context="Paris is the capital of France.",
                            max_seq_len=128, doc_stride=64, api_name="/answer")
    answers = answer[1]                                         # the pipeline-shaped answers
    found = answers if isinstance(answers, list) else [answers]
    assert found and all("Paris is the capital of France."[a["start"]:a["end"]] == a["answer"] for a in found)
