"""The left-to-right LM's attention (``causal_attention_mask``): a position's prediction depends only on the tokens
up to it, exactly, on both attention paths; and the model equals transformers' ``BertLMHeadModel`` (``is_decoder``:
causal attention, the tied MLM head) on the same weights, loss included (it shifts the labels inside its loss, we
shift them in the data)."""
from __future__ import annotations

import pytest
import torch
import transformers

from engine.data.causal_lm import next_token_labels
from engine.model.encoder import additive_attention_mask, causal_attention_mask
from engine.model.heads import IGNORE_INDEX
from support.reference import CONFIGS, PARITY, assert_tied, batch, check, hf_config, hf_state, ours_with_heads

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_causal_mask_keeps_the_past_and_drops_the_padding():
    mask = causal_attention_mask(torch.tensor([[1, 1, 1, 0]]))
    assert mask.tolist() == [[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]]]
    assert additive_attention_mask(mask, torch.float32).shape == (1, 1, 4, 4)
    assert additive_attention_mask(torch.ones(2, 3, 3), torch.float32) is None


@pytest.mark.parametrize("name", ["odd", "tiny"])
@pytest.mark.parametrize("explicit", [False, True])
def test_later_tokens_do_not_change_earlier_predictions(name, explicit):
    config = CONFIGS[name]
    model = ours_with_heads(config, ("mlm",), seed=4)
    inputs = batch(config, batch_size=3, seq_len=12, lengths=(12, 9, 6))
    with torch.no_grad():
        before = model(**{**inputs, "attention_mask": causal_attention_mask(inputs["attention_mask"])},
                       output_attentions=explicit).mlm.logits                                # (B, S, V)
        for cut in (0, 3, 5):
            changed = inputs["input_ids"].clone()
            later = torch.randint(5, config.vocab_size, changed[:, cut + 1:].shape, generator=torch.Generator()
                                  .manual_seed(cut))
            changed[:, cut + 1:] = torch.where(inputs["attention_mask"][:, cut + 1:].bool(), later,
                                               changed[:, cut + 1:])
            after = model(input_ids=changed, token_type_ids=inputs["token_type_ids"],
                          attention_mask=causal_attention_mask(inputs["attention_mask"]),
                          output_attentions=explicit).mlm.logits
            assert torch.equal(after[:, :cut + 1], before[:, :cut + 1]), f"a token after {cut} changed its logits"
            assert not torch.equal(after[:, cut + 1:], before[:, cut + 1:])
        bidirectional = model(**inputs).mlm.logits
        assert not torch.equal(bidirectional[:, 0], before[:, 0]), "without the causal mask the future is seen"


def test_the_left_to_right_model_equals_transformers_bert_lm_head_model():
    config = CONFIGS["odd"]
    ours = ours_with_heads(config, ("mlm",), seed=2)
    assert_tied(ours)
    hf = hf_config(config)
    hf.is_decoder = True
    theirs = transformers.BertLMHeadModel(hf).eval()
    loaded = theirs.load_state_dict(hf_state(ours.state_dict()), strict=False)
    assert not loaded.unexpected_keys and set(loaded.missing_keys) <= {"cls.predictions.decoder.bias"}
    inputs = batch(config, batch_size=3, seq_len=11, lengths=(11, 8, 5))
    inputs["token_type_ids"].zero_()
    labels = next_token_labels(inputs["input_ids"], inputs["attention_mask"])
    with torch.no_grad():
        a = ours(**{**inputs, "attention_mask": causal_attention_mask(inputs["attention_mask"])}, labels=labels)
        b = theirs(**inputs, labels=inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, IGNORE_INDEX))
    real = inputs["attention_mask"].bool()
    check("causal logits", a.mlm.logits[real], b.logits[real], PARITY)
    check("next-token loss", a.mlm.loss, b.loss, PARITY)
