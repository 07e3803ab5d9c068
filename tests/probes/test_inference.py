"""engine.probes.inference: the one entry point per task that the UI calls."""
from __future__ import annotations

import pytest

import engine
from engine.probes import inference
from engine.text.tokenizer import WordPieceTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    tokenizer = WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(VOCAB)})
    config = engine.preset("tiny", vocab_size=len(VOCAB), hidden_size=32, num_attention_heads=4,
                           intermediate_size=37, max_position_embeddings=16)
    model = engine.BertWithHeads(config, heads=("mlm", "nsp"))
    return engine.load(engine.save(model, tokenizer, tmp_path_factory.mktemp("m") / "model"))


def test_tokenize_explains_with_the_models_own_tokenizer(loaded):
    result = inference.tokenize(loaded, "UNwant\u00e9d,running")
    assert [r.token for r in result.rows] == ["[CLS]", "un", "##want", "##ed", ",", "runn", "##ing", "[SEP]"]
    assert result.max_length == 16  # the model's positions, by default


def test_tokenize_refuses_lengths_beyond_the_models_positions(loaded):
    with pytest.raises(ValueError, match="16 positions"):
        inference.tokenize(loaded, "running", max_length=17)


def test_tokenize_without_tokenizer_files_says_so(loaded):
    bare = engine.LoadedModel(loaded.model, None, loaded.config, source="bare")
    with pytest.raises(ValueError, match="no tokenizer"):
        inference.tokenize(bare, "running")


def test_fill_mask_and_answer_are_reachable_and_check_heads(loaded):
    predictions = inference.fill_mask(loaded, "un [MASK] ,", top_k=3)
    assert len(predictions) == 3 and predictions[0]["score"] >= predictions[-1]["score"]
    with pytest.raises(ValueError, match="no question-answering"):
        inference.answer(loaded, "wanted?", "un want ed , running")
