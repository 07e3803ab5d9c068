"""The feature-based arms of BERT's Table 7: each recipe reads exactly the model's own hidden states (the last four
concatenated are 4 x hidden wide and equal ``output_hidden_states``), a model too shallow for a recipe is refused in
a sentence, and the frozen-feature classifier is scored on the fine-tuning's held-out sentences."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from engine.data.features import split_held_out
from engine.data.tagged_text import read_tagged_file
from engine.experiments.features import combine, frozen_feature_accuracy, layers_of, layers_to_mix
from engine.model.heads import BertWithHeads
from engine.model.loaded_model import LoadedModel
from engine.probes.syntax.conllu import DependencySentence
from engine.probes.syntax.features import sentence_features
from support.reference import randomize_

pytestmark = pytest.mark.usefixtures("one_thread")
WORDS = ("the", "cat", "sat", "on", "the", "mat")          # one piece each in the test vocabulary


@pytest.fixture(scope="module")
def loaded(make_config, tiny_tokenizer) -> LoadedModel:
    model = randomize_(BertWithHeads(make_config(num_hidden_layers=5), heads=("mlm",)), 7, scale=0.3).eval()
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny, 5 layers")


def hidden_states(loaded: LoadedModel) -> tuple[torch.Tensor, ...]:
    """The model's own hidden states of ``[CLS] WORDS [SEP]``: L + 1 tensors (S, H)."""
    ids = torch.tensor([loaded.tokenizer.encode(" ".join(WORDS)).input_ids])
    assert ids.shape[1] == len(WORDS) + 2                  # [CLS] words [SEP]: one piece a word
    with torch.no_grad():
        out = loaded.model.bert(ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids),
                                output_hidden_states=True)
    return tuple(h[0] for h in out.hidden_states)


def test_concat_last_four_is_four_hidden_wide_and_equals_the_models_hidden_states(loaded: LoadedModel) -> None:
    sentence = DependencySentence(WORDS, (0,) * 6, ("",) * 6, ("X",) * 6)
    vectors = sentence_features(loaded, [sentence]).vectors[0]                  # (L + 1, W, H)
    hidden = hidden_states(loaded)
    width = loaded.config.hidden_size
    concat = combine(vectors, "concat-last-4")
    assert concat.shape == (len(WORDS), 4 * width)
    expected = torch.cat(hidden[-4:], dim=-1)[1:-1].numpy()                     # layers 2..5, the words' positions
    np.testing.assert_allclose(concat, expected, atol=1e-5)
    np.testing.assert_allclose(combine(vectors, "embeddings"), hidden[0][1:-1].numpy(), atol=1e-5)
    np.testing.assert_allclose(combine(vectors, "second-to-last"), hidden[-2][1:-1].numpy(), atol=1e-5)
    np.testing.assert_allclose(combine(vectors, "sum-all"), sum(hidden[1:])[1:-1].numpy(), atol=1e-4)
    np.testing.assert_allclose(combine(vectors, "sum-last-4"), sum(hidden[-4:])[1:-1].numpy(), atol=1e-4)
    mixed = layers_to_mix(vectors, "sum-last-4")                                # what the BiLSTM learns to weigh
    assert mixed.shape == (len(WORDS), 4, width)
    np.testing.assert_allclose(mixed.sum(axis=1), combine(vectors, "sum-last-4"), atol=1e-5)


def test_a_recipe_the_model_is_too_shallow_for_is_refused_in_a_sentence() -> None:
    assert layers_of("concat-last-4", 6) == [3, 4, 5, 6] and layers_of("sum-all", 6) == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="needs a model of at least 4 encoder layers, not 2"):
        layers_of("concat-last-4", 2)
    with pytest.raises(ValueError, match="no feature recipe 'top'; there are embeddings"):
        layers_of("top", 6)


def test_table8s_recipe_is_the_last_four_or_every_encoder_layer_of_a_shallower_model() -> None:
    assert layers_of("concat-up-to-4", 6) == layers_of("concat-last-4", 6) == [3, 4, 5, 6]
    assert layers_of("concat-up-to-4", 2) == [1, 2] and layers_of("concat-up-to-4", 1) == [1]   # never the embeddings


def test_the_classifier_is_scored_on_the_fine_tunings_held_out_sentences(loaded: LoadedModel,
                                                                          tmp_path: Path) -> None:
    lines = []
    for i in range(20):                                                          # "the" DET, nouns NOUN, ...
        lines += ["the\tDET", ("cat" if i % 2 else "dog") + "\tNOUN", "sat\tVERB", "on\tADP", "the\tDET",
                  "mat\tNOUN", ""]
    data = tmp_path / "pos.tsv"
    data.write_text("\n".join(lines), encoding="utf-8")
    train, held = split_held_out(read_tagged_file(data), 0.2, 3)                # what the fine-tuning holds out
    assert len(held) == 4 and len(train) == 16
    accuracy = frozen_feature_accuracy(loaded, "concat-last-4", data, 0.2, 3)
    assert accuracy == 1.0                                                       # each word has one tag here
    assert frozen_feature_accuracy(loaded, "concat-last-4", data, 0.2, 3, classifier="bilstm") == 1.0   # the paper's
    assert frozen_feature_accuracy(loaded, "sum-last-4", data, 0.2, 3, classifier="bilstm") == 1.0   # weights learnt
    with pytest.raises(ValueError, match="no feature classifier 'crf'; there are logistic, bilstm"):
        frozen_feature_accuracy(loaded, "last", data, 0.2, 3, classifier="crf")
