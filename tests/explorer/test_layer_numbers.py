"""The one conversion between the layers a learner sees (from 1; 0 = the embeddings' output) and the engine's
attention-layer indices (from 0): explorer/layer_numbers.py."""
from __future__ import annotations

import pytest

from explorer import layer_numbers as layers
from explorer.glossary import LAYER_RULE


def test_the_ui_counts_attention_layers_from_1_and_the_engine_from_0() -> None:
    assert [layers.shown_layer(i) for i in range(3)] == [1, 2, 3] == layers.shown_layers(3)
    assert [layers.layer_index(n, 6) for n in (1, 3.0, 6)] == [0, 2, 5]               # a slider sends 3.0
    assert layers.head_index(6, 4, 1, 0) == (0, 0) and layers.head_index(6, 4, 6, 3) == (5, 3)
    assert "layer 0 is the embeddings' output" in LAYER_RULE                        # the rule the glossary states


@pytest.mark.parametrize("layer, head, message", [
    (0, 0, "layer 0 is the embeddings' output, before any attention: the layers with attention heads are numbered "
           "1 to 6"),
    (7, 0, r"layer 7 does not exist: this model has 6 layers, numbered 1 to 6 \(layer 0 is the embeddings' output\)"),
    (-1, 0, "layer -1 does not exist"),
    (1.5, 0, "layer must be a whole number from 1 to 6, got 1.5"),
    (True, 0, "layer must be a whole number from 1 to 6, got True"),
    (1, 4, "head 4 does not exist: each layer has 4 heads, numbered 0 to 3"),
    (1, -1, "head -1 does not exist"),
    (1, "x", "head must be a whole number from 0 to 3, got 'x'"),
])
def test_errors_use_the_uis_numbering(layer, head, message) -> None:
    with pytest.raises(ValueError, match=message):
        layers.head_index(6, 4, layer, head)


def test_the_ablation_spec_numbers_layers_from_1() -> None:
    assert layers.parse_heads("1:0, 2:3", 6, 4) == [(0, 0), (1, 3)]
    assert layers.parse_heads("4:*; 4:1 1:2", 6, 4) == [(3, 0), (3, 1), (3, 2), (3, 3), (0, 2)]   # no repeats
    assert layers.parse_heads("", 6, 4) == []
    assert layers.heads_text([(0, 1), (5, 3)]) == "1:1, 6:3"
    assert layers.heads_text(layers.parse_heads("2:1, 3:*", 6, 2)) == "2:1, 3:0, 3:1"       # a round trip
    for text, message in (("0:1", "layer 0 is the embeddings' output"), ("7:0", "layer 7 does not exist"),
                          ("1:4", "head 4 does not exist"), ("1-2", "is not layer:head"),
                          ("\u00b2:1", "is not layer:head"), ("a:b", "is not layer:head")):
        with pytest.raises(ValueError, match=message):
            layers.parse_heads(text, 6, 4)
