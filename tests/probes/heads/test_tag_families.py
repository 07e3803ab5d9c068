"""Tag words on every family (docs/design/families.md): a family's own tokenizer folder
(``support/family_tokenizers.py``) with a random token-classification model saved by ``transformers`` gives
exactly the ``transformers`` token-classification pipeline's groups (``aggregation_strategy="first"``), whether its
vocabulary marks continuations (WordPiece) or word starts (byte-level BPE, SentencePiece)."""
from __future__ import annotations

import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load
from engine.probes.heads.tag import tag_words
from support.family_tokenizers import build

pytestmark = pytest.mark.usefixtures("one_thread")
SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             max_position_embeddings=64)
LABELS = {0: "NOUN", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}    # no "O": every word is in a group
FAMILIES = {
    "roberta": (transformers.RobertaConfig, SHAPE, transformers.RobertaForTokenClassification),
    "xlmr": (transformers.XLMRobertaConfig, SHAPE, transformers.XLMRobertaForTokenClassification),
    "albert": (transformers.AlbertConfig, dict(SHAPE, embedding_size=16), transformers.AlbertForTokenClassification),
    "distilbert": (transformers.DistilBertConfig, dict(dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                                                       max_position_embeddings=64),
                   transformers.DistilBertForTokenClassification),
}
TEXTS = ["The quick brown fox jumps over the lazy dog in Paris.",
         "Researchers trained unbelievable encoders, naïve résumés and all!",
         "She sells sea shells by the sea shore of Zürich."]


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    build(request.param, folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config_class, fields, tagger_class = FAMILIES[request.param]
    config = config_class(**fields, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, id2label=LABELS,
                          label2id={v: k for k, v in LABELS.items()})
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tagger_class(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the pipeline warns that non-word-aware tokenizers guess words
        pipe = transformers.pipeline("token-classification", model=str(folder), tokenizer=str(folder), device="cpu",
                                     aggregation_strategy="first")
    return load(folder), pipe


@pytest.mark.parametrize("text", TEXTS)
def test_each_family_tags_words_as_the_pipeline(family, text):
    loaded, pipe = family
    ours = tag_words(loaded, text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = pipe(text)
    assert [(o["entity_group"], o["word"], o["start"], o["end"]) for o in ours] == \
           [(t["entity_group"], t["word"], t["start"], t["end"]) for t in theirs]
    assert all(abs(o["score"] - float(t["score"])) <= 1e-4 for o, t in zip(ours, theirs))
    assert ours, "random weights tagged nothing: the comparison would be empty"
