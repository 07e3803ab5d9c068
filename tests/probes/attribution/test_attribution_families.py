"""Why with every family (docs/design/families.md): the integrated-gradients baseline is the padding token
everywhere but the specials, found by role, so a RoBERTa keeps its own <s>, </s> and <mask> and pads with <pad>
(its vocabulary has none of BERT's names)."""
from __future__ import annotations

import pytest

from engine.checkpoints.hf_format import load
from engine.probes.attribution.methods import attribute
from support.saved_families import save_family_model

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_roberta_baseline_keeps_its_own_specials(tmp_path):
    loaded = load(save_family_model("roberta", tmp_path / "roberta"))
    result = attribute(loaded, "fill_mask", "The capital of France is [MASK].", n_steps=4)
    assert result.baseline == "<pad> for every token but <s>, </s>, <mask>"
    assert [t for t in result.baseline_tokens if t != "<pad>"] == ["<s>", "<mask>", "</s>"]
