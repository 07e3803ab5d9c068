"""Attention with every family (docs/design/families.md): ModernBERT's local layers see a window and the
Attention view says which layers are local; the statistics name the tokenizer's own specials (RoBERTa's ``<s>``);
a typed ``[MASK]`` is the model's own mask token in every attention view."""
from __future__ import annotations

import numpy as np
import pytest

from engine.checkpoints.hf_format import load
from engine.model.families.registry import attention_reach
from engine.probes.attention.ablation import ablate_heads
from engine.probes.attention.maps import attention
from engine.probes.attention.neuron_view import neuron_view
from explorer.attention.actions import summary_markdown
from explorer.attention.canvas import heatmap_value
from explorer.attention.views import stats_table
from support.saved_families import save_family_model

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun."


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {family: load(save_family_model(family, root / family)) for family in ("modernbert", "roberta")}


def test_modernbert_local_layers_see_only_their_window(models):
    loaded = models["modernbert"]
    reach = attention_reach(loaded.config)
    assert reach == (None, 4, 4)                 # every third layer global; a window of 8: 4 tokens each side
    result = attention(loaded, TEXT)
    assert result.reach == reach
    size = len(result.tokens)
    distance = np.abs(np.arange(size)[:, None] - np.arange(size)[None, :])   # (S, S)
    for layer, window in enumerate(reach):
        far = result.attentions[layer][:, distance > (window if window is not None else size)]
        assert (far == 0).all()
        if window is None:
            assert (result.attentions[layer][:, distance > 4] > 0).any()     # a global layer reaches farther
    assert "Layer 2 is **local**: each token sees the 4 tokens on each side" in summary_markdown(result, 1, 0)
    assert "Layer 1 is **global**" in summary_markdown(result, 0, 0)


def test_other_families_see_everything_and_name_their_specials(models):
    loaded = models["roberta"]
    assert attention_reach(loaded.config) == (None, None)
    summary = summary_markdown(attention(loaded, TEXT), 0, 0)
    assert "local" not in summary and r"\<s\> " in summary and r"\</s\> " in summary


def test_a_typed_mask_is_the_models_own_mask_in_the_attention_views_and_head_removal(models):
    """RoBERTa's mask is ``<mask>``: a typed ``[MASK]`` is read as it, as Fill-mask and Compare read it, so the
    Attention tab's head removal finds the mask to fill instead of scoring the pieces ``[``, ``MASK``, ``]``."""
    loaded = models["roberta"]
    text = "The cat sat on the [MASK] in the warm sun."
    mask = loaded.tokenizer.mask_token
    assert mask == "<mask>"
    maps = attention(loaded, text)
    assert maps.tokens.count(mask) == 1 and "MASK" not in "".join(maps.tokens)
    assert neuron_view(loaded, text, layer=0, head=0, query=1).tokens == maps.tokens
    removed = ablate_heads(loaded, text, head_mask=[[1.0] * loaded.config.num_attention_heads,
                                                    [0.0] + [1.0] * (loaded.config.num_attention_heads - 1)])
    assert removed.tokens == maps.tokens
    assert len(removed.baseline.fills) == len(removed.ablated.fills) == 1     # one mask, its fillers both ways
    assert maps.tokens.index(mask) not in removed.scored_positions
    assert attention(loaded, text.replace("[MASK]", mask)).tokens == maps.tokens   # either spelling, one input


def test_the_head_statistics_table_and_canvas_name_the_models_own_specials(models):
    result = attention(models["roberta"], TEXT)
    assert result.special_names() == ("<s>", "</s>")
    table = stats_table(result)
    assert list(table.columns[3:5]) == ["<s>", "</s>"] and "[CLS]" not in table.columns
    assert len(table) == result.num_layers * result.num_heads
    assert heatmap_value(result, 0, 0, [0], "view")["special_names"] == ["<s>", "</s>"]   # the canvas's hover line
