"""Attention probing: parity with transformers' eager attentions, head statistics on hand-made
maps, head ablation (pseudo-log-likelihood, [MASK] fillers, IsNext), index checks, checkpoints."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import transformers

from engine.probes.attention.maps import attention_over_checkpoints, check_head_index
from engine.model.loaded_model import LoadedModel
from engine.probes.heads.fill_mask import fill_mask_details
from engine.probes.attention.ablation import check_head_mask, head_mask_from_heads, parse_heads
from engine.probes.attention.head_stats import STAT_NAMES, head_statistics
from engine.model.heads import BertWithHeads
from engine.probes.inference import ablate_heads, attention
from support.reference import hf_copy, randomize_

pytestmark = pytest.mark.usefixtures("one_thread")

PARITY = 1e-5
TEXT = "the cat sat on the mat because it was tired"
PAIR = "the dog ran"


def _loaded(make_config, tokenizer, heads=("mlm", "nsp"), seed=0) -> LoadedModel:
    model = randomize_(BertWithHeads(make_config(), heads=heads), seed, scale=0.3).eval()
    return LoadedModel(model, tokenizer, model.config, f"tiny seed {seed}")


@pytest.fixture(scope="module")
def loaded(make_config, tiny_tokenizer) -> LoadedModel:
    return _loaded(make_config, tiny_tokenizer)


@pytest.fixture(scope="module")
def hf(loaded):
    return hf_copy(loaded.model, transformers.BertForPreTraining)


def _hf_attentions(hf, result) -> np.ndarray:
    with torch.no_grad():
        out = hf(torch.tensor([result.input_ids]), token_type_ids=torch.tensor([result.token_type_ids]),
                 output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).numpy()              # (L, nh, S, S)


# --- attention maps ----------------------------------------------------------------------

@pytest.mark.parametrize("pair", [None, PAIR])
def test_attentions_match_transformers_eager(loaded, hf, pair) -> None:
    result = attention(loaded, TEXT, pair)
    config = loaded.config
    n = len(result.tokens)
    assert result.attentions.shape == (config.num_hidden_layers, config.num_attention_heads, n, n)
    assert result.attentions.dtype == np.float32
    assert np.abs(result.attentions - _hf_attentions(hf, result)).max() <= PARITY
    np.testing.assert_allclose(result.attentions.sum(-1), 1.0, atol=1e-5)
    assert result.tokens[0] == "[CLS]" and result.tokens[-1] == "[SEP]"
    if pair:
        assert result.tokens.count("[SEP]") == 2 and result.token_type_ids[-1] == 1 and result.text_pair == PAIR
    assert set(result.stats.as_dict()) == set(STAT_NAMES)
    assert all(v.shape == (config.num_hidden_layers, config.num_attention_heads)
               for v in result.stats.as_dict().values())


def test_statistics_of_the_result_match_its_maps(loaded) -> None:
    result = attention(loaded, TEXT, PAIR)
    sep = [i for i, t in enumerate(result.tokens) if t == "[SEP]"]
    expected = head_statistics(result.attentions, [0], sep)
    for name in STAT_NAMES:
        np.testing.assert_allclose(result.stats.get(name), expected.get(name))
    rows = result.records()
    assert len(rows) == result.num_layers * result.num_heads
    assert list(rows[0]) == ["layer", "head", *STAT_NAMES]
    assert rows[5]["layer"] == 1 and rows[5]["head"] == 1
    payload = result.to_dict(1, 2)
    assert payload["layer"] == 1 and payload["head"] == 2 and payload["tokens"] == result.tokens
    np.testing.assert_allclose(payload["attention"], result.attentions[1, 2])


def test_max_length_truncates_and_is_checked(loaded) -> None:
    result = attention(loaded, TEXT, max_length=6)
    assert len(result.tokens) == 6 and result.truncated and result.num_truncated_tokens > 0
    with pytest.raises(ValueError, match="longer than this model's 64 positions"):
        attention(loaded, TEXT, max_length=65)
    with pytest.raises(ValueError, match="text is empty"):
        attention(loaded, "   ")
    bare = LoadedModel(loaded.model, None, loaded.config, "no tokenizer")
    with pytest.raises(ValueError, match="no tokenizer"):
        attention(bare, TEXT)


# --- statistics on hand-made maps --------------------------------------------------------

def test_identity_map() -> None:
    s = head_statistics(np.eye(5)[None, None], cls_positions=[0], sep_positions=[4]).head(0, 0)
    assert s["self"] == 1.0 and s["entropy"] == 0.0 and s["distance"] == 0.0
    assert s["prev"] == 0.0 and s["next"] == 0.0
    assert s["cls"] == pytest.approx(1 / 5) and s["sep"] == pytest.approx(1 / 5)


def test_uniform_map() -> None:
    n = 6
    s = head_statistics(np.full((1, 1, n, n), 1 / n)).head(0, 0)
    assert s["entropy"] == pytest.approx(math.log(n))
    assert s["self"] == pytest.approx(1 / n) and s["prev"] == pytest.approx(1 / n)
    assert s["cls"] == pytest.approx(1 / n) and s["sep"] == 0.0     # no [SEP] positions given
    assert s["distance"] == pytest.approx((n * n - 1) / (3 * n))     # mean |i - j| over a uniform grid


def test_previous_next_cls_and_sep_heads() -> None:
    n = 5
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0                                 # the first token has no previous one: it looks at itself
    nxt = np.eye(n, k=1)
    nxt[-1, -1] = 1.0
    to_cls = np.zeros((n, n))
    to_cls[:, 0] = 1.0
    to_seps = np.zeros((n, n))
    to_seps[:, [2, 4]] = 0.5
    stats = head_statistics(np.stack([prev, nxt, to_cls, to_seps])[None], cls_positions=[0], sep_positions=[2, 4])
    assert stats.prev[0, 0] == 1.0 and stats.next[0, 0] == 0.0 and stats.distance[0, 0] == pytest.approx(4 / 5)
    assert stats.next[0, 1] == 1.0 and stats.prev[0, 1] == 0.0
    assert stats.cls[0, 2] == 1.0 and stats.entropy[0, 2] == 0.0 and stats.sep[0, 2] == 0.0
    assert stats.sep[0, 3] == 1.0 and stats.entropy[0, 3] == pytest.approx(math.log(2)) and stats.cls[0, 3] == 0.0


def test_statistics_reject_bad_input() -> None:
    with pytest.raises(ValueError, match=r"\(L, nh, S, S\)"):
        head_statistics(np.zeros((2, 3, 4)).reshape(1, 2, 3, 4))
    with pytest.raises(ValueError, match="outside the sequence"):
        head_statistics(np.eye(3)[None, None], sep_positions=[3])
    with pytest.raises(ValueError, match="unknown head statistic"):
        head_statistics(np.eye(3)[None, None]).get("bogus")


# --- index checks ------------------------------------------------------------------------

def test_head_indices_are_checked(loaded) -> None:
    assert check_head_index(2, 4, 1.0, 3) == (1, 3)
    with pytest.raises(ValueError, match="layer 2 does not exist: this model has 2 layers, numbered 0 to 1"):
        check_head_index(2, 4, 2, 0)
    with pytest.raises(ValueError, match="head -1 does not exist"):
        check_head_index(2, 4, 0, -1)
    for bad in (1.5, True, "1", float("nan")):
        with pytest.raises(ValueError, match="whole number"):
            check_head_index(2, 4, bad, 0)
    with pytest.raises(ValueError, match="head 4 does not exist"):
        attention(loaded, TEXT).head_map(0, 4)


def test_parse_heads_and_masks(loaded) -> None:
    assert parse_heads("0:1, 1:3;0:1", 2, 4) == [(0, 1), (1, 3)]
    assert parse_heads("1:*", 2, 4) == [(1, 0), (1, 1), (1, 2), (1, 3)]
    for text, message in (("2:0", "layer 2 does not exist"), ("0:4", "head 4 does not exist"),
                          ("0-1", "is not layer:head"), ("a:b", "is not layer:head"), ("1", "is not layer:head")):
        with pytest.raises(ValueError, match=message):
            parse_heads(text, 2, 4)
    mask = head_mask_from_heads(loaded.config, [(0, 1), (1, 3)])
    assert mask.shape == (2, 4) and mask.sum() == 6 and mask[0, 1] == 0 and mask[1, 3] == 0
    with pytest.raises(ValueError, match=r"shape \(layers, heads\) = \(2, 4\)"):
        check_head_mask(loaded.config, np.ones((4,)))
    with pytest.raises(ValueError, match="between 0"):
        check_head_mask(loaded.config, np.full((2, 4), 2.0))


# --- ablation ----------------------------------------------------------------------------

def _hf_pll(hf, ids: list[int], positions: list[int], mask_id: int, types: list[int] | None = None) -> np.ndarray:
    """-log p(true token) with each position masked in turn, one forward each (the slow, obvious way)."""
    losses = []
    with torch.no_grad():
        for p in positions:
            masked = torch.tensor([ids])
            masked[0, p] = mask_id
            type_ids = torch.tensor([types]) if types is not None else None
            logits = hf(masked, token_type_ids=type_ids).prediction_logits[0, p]
            losses.append(-logits.log_softmax(-1)[ids[p]].item())
    return np.array(losses)


def test_all_heads_kept_equals_baseline(loaded, hf) -> None:
    result = ablate_heads(loaded, "the cat [MASK] on the mat", PAIR, np.ones((2, 4)))
    assert result.masked_heads == [] and any("equals the baseline" in n for n in result.notes)
    base, same = result.baseline, result.ablated
    np.testing.assert_allclose(base.token_losses, same.token_losses, atol=1e-6)
    assert base.fills[0].token_ids == same.fills[0].token_ids and base.is_next == pytest.approx(same.is_next)
    encoded = attention(loaded, "the cat [MASK] on the mat", PAIR)
    assert result.scored_positions == [i for i, t in enumerate(encoded.tokens) if t not in ("[CLS]", "[SEP]", "[MASK]")]
    # pseudo-log-likelihood = transformers with each token masked in turn (the [MASK] stays masked)
    expected = _hf_pll(hf, encoded.input_ids, result.scored_positions, loaded.tokenizer.mask_token_id,
                       encoded.token_type_ids)
    np.testing.assert_allclose(base.token_losses, expected, atol=1e-4)
    assert base.pll_loss == pytest.approx(expected.mean(), abs=1e-4)
    # [MASK] fillers = the fill-mask engine's; P(IsNext) = transformers' NSP softmax
    fm = fill_mask_details(loaded, "the cat [MASK] on the mat", top_k=5, text_pair=PAIR).masks[0]
    assert base.fills[0].token_ids == fm.token_ids and base.fills[0].position == fm.position
    np.testing.assert_allclose(base.fills[0].probs, fm.scores, atol=1e-6)
    with torch.no_grad():
        nsp = hf(torch.tensor([encoded.input_ids]), token_type_ids=torch.tensor([encoded.token_type_ids]))
    assert base.is_next == pytest.approx(nsp.seq_relationship_logits.softmax(-1)[0, 0].item(), abs=1e-5)


def test_head_mask_equals_zeroing_the_heads_values(loaded) -> None:
    """Masking a head's probabilities zeroes its context, exactly as zeroing its value projection does
    (transformers 5 has no head_mask any more, so this is the reference)."""
    heads = [(0, 1), (1, 3)]
    result = ablate_heads(loaded, TEXT, None, head_mask_from_heads(loaded.config, heads))
    assert result.masked_heads == heads
    reference = hf_copy(loaded.model, transformers.BertForPreTraining)
    size = loaded.config.head_size
    with torch.no_grad():
        for layer, head in heads:
            value = reference.bert.encoder.layer[layer].attention.self.value
            value.weight[head * size:(head + 1) * size] = 0
            value.bias[head * size:(head + 1) * size] = 0
    ids = attention(loaded, TEXT).input_ids
    expected = _hf_pll(reference, ids, result.scored_positions, loaded.tokenizer.mask_token_id)
    np.testing.assert_allclose(result.ablated.token_losses, expected, atol=1e-4)
    assert result.loss_change == pytest.approx(result.ablated.pll_loss - result.baseline.pll_loss)


def test_masking_every_head_changes_the_loss(loaded) -> None:
    result = ablate_heads(loaded, TEXT, None, np.zeros((2, 4)))
    assert len(result.masked_heads) == 8
    assert abs(result.loss_change) > 1e-3
    assert result.baseline.is_next is None and result.baseline.fills == []


def test_long_inputs_are_chunked_the_same(loaded, monkeypatch) -> None:
    import engine.probes.attention.ablation as module

    whole = ablate_heads(loaded, TEXT, None, np.zeros((2, 4)))
    monkeypatch.setattr(module, "TOKENS_PER_CHUNK", 20)                  # one copy per forward
    chunked = ablate_heads(loaded, TEXT, None, np.zeros((2, 4)))
    np.testing.assert_allclose(whole.ablated.token_losses, chunked.ablated.token_losses, atol=1e-5)
    capped = ablate_heads(loaded, TEXT, None, np.zeros((2, 4)), max_scored=4)
    assert len(capped.scored_positions) == 4 and any("over 4 of the" in n for n in capped.notes)
    assert capped.scored_positions[0] == whole.scored_positions[0]
    assert capped.scored_positions[-1] == whole.scored_positions[-1]
    index = [whole.scored_positions.index(p) for p in capped.scored_positions]
    np.testing.assert_allclose(capped.ablated.token_losses, whole.ablated.token_losses[index], atol=1e-5)


def test_ablation_errors(make_config, tiny_tokenizer, loaded) -> None:
    encoder = _loaded(make_config, tiny_tokenizer, heads=())
    with pytest.raises(ValueError, match="no masked-LM head.*only attention maps are available"):
        ablate_heads(encoder, TEXT)
    assert attention(encoder, TEXT).attentions.shape[0] == 2          # attention maps still work
    with pytest.raises(ValueError, match=r"at most 5 tokens; this input has \d+"):
        ablate_heads(loaded, TEXT, max_tokens=5)
    with pytest.raises(ValueError, match="top_k"):
        ablate_heads(loaded, TEXT, top_k=0)
    with pytest.raises(ValueError, match="shape"):
        ablate_heads(loaded, TEXT, head_mask=np.ones((3, 4)))
    mlm_only = _loaded(make_config, tiny_tokenizer, heads=("mlm",))
    result = ablate_heads(mlm_only, TEXT, PAIR, np.zeros((2, 4)))
    assert result.baseline.is_next is None and any("next-sentence" in n for n in result.notes)
    only_specials = ablate_heads(loaded, "[MASK]", None, np.zeros((2, 4)))
    assert only_specials.baseline.pll_loss is None and only_specials.loss_change is None
    assert len(only_specials.baseline.fills) == 1


# --- over checkpoints --------------------------------------------------------------------

def test_attention_over_checkpoints(make_config, tiny_tokenizer) -> None:
    models = [(f"step-{s:06d}", _loaded(make_config, tiny_tokenizer, seed=s)) for s in (2, 4, 6)]
    found = attention_over_checkpoints((m for m in models), TEXT, PAIR, layer=1, head=2)
    assert found.labels == ["step-000002", "step-000004", "step-000006"] and found.steps == [2, 4, 6]
    assert (found.layer, found.head) == (1, 2) and len(found.maps) == 3 and len(found.all_stats) == 3
    for (_, model), attn, stats in zip(models, found.maps, found.all_stats):
        direct = attention(model, TEXT, PAIR)
        np.testing.assert_array_equal(attn, direct.attentions[1, 2])
        np.testing.assert_allclose(stats.entropy, direct.stats.entropy)
    assert set(found.stats) == set(STAT_NAMES) and found.stats["entropy"].shape == (3,)
    assert found.stats["self"][1] == pytest.approx(found.all_stats[1].self[1, 2])
    custom = attention_over_checkpoints(models[:2], TEXT, None, 0, 0, steps=[10, None])
    assert custom.steps == [10, None]
    with pytest.raises(ValueError, match="no checkpoints"):
        attention_over_checkpoints([], TEXT, None, 0, 0)
    with pytest.raises(ValueError, match="layer 5 does not exist"):
        attention_over_checkpoints(models, TEXT, None, 5, 0)
    with pytest.raises(ValueError, match=r"1 step\(s\) given for more checkpoints"):
        attention_over_checkpoints(models[:2], TEXT, None, 0, 0, steps=[1])
    with pytest.raises(ValueError, match=r"3 step\(s\) given for 2 checkpoints"):
        attention_over_checkpoints(models[:2], TEXT, None, 0, 0, steps=[1, 2, 3])


def test_the_maps_are_copied_one_layer_at_a_time_into_float32(loaded) -> None:
    """Issue 34: the encoder's per-layer maps and their stacked copy were held whole together. A list given to
    ``attention_result`` is emptied as it is read (each layer freed once copied); the maps are float32 and the
    statistics equal ``head_statistics`` of them."""
    from engine.probes.attention.maps import attention_result, encode_input, model_inputs

    encoding = encode_input(loaded, TEXT, PAIR)
    ids, types = model_inputs(loaded, encoding)
    with torch.inference_mode():
        layers = list(loaded.model.bert(ids, attention_mask=torch.ones_like(ids), token_type_ids=types,
                                        output_attentions=True).attentions)
    expected = torch.stack([layer[0] for layer in layers]).numpy()                   # (L, nh, S, S)
    result = attention_result(loaded, encoding, layers, TEXT, PAIR)
    assert layers == [None] * len(layers)
    assert result.attentions.dtype == np.float32
    np.testing.assert_array_equal(result.attentions, expected)
    sep = [i for i, t in enumerate(result.tokens) if t == "[SEP]"]
    again = head_statistics(result.attentions, [0], sep)
    for name in STAT_NAMES:
        np.testing.assert_allclose(result.stats.get(name), again.get(name), atol=1e-6)
    half = head_statistics(result.attentions.astype(np.float16), [0], sep)            # float16 maps: float32 math
    np.testing.assert_allclose(half.entropy, again.entropy, atol=2e-3)
