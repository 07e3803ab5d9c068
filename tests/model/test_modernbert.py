"""ModernBERT at the door: random models saved by ``transformers`` (eager attention, every parameter drawn at random)
load through ``engine.load`` and give transformers' hidden states, every layer's attention map and the heads' logits
within 1e-5, on a full batch and on a padded one (hidden states and logits compared where the mask is 1); the local
window (8 positions, 24 tokens) matters; fp16 shards load; our export loads back into transformers' class with
nothing missing or unexpected and the same logits; the fast attention path, ``output_qk`` and ``head_mask`` agree
with their definitions; what is not read is refused with a sentence."""
from __future__ import annotations

import copy

import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load, save
from engine.checkpoints.model_fit import config_size_lower_bound, parameter_count
from engine.model.config import BertConfig
from engine.model.families.registry import config_from_dict, config_to_dict
from engine.model.heads import BertWithHeads
from support.reference import randomized

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = 1e-5
TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
# plain: transformers' defaults but for the sizes (layers 0 and 3 global, window 8 of 24 tokens), other rotary bases;
# biased: every optional bias, decoder_bias off, other activations, mean pooling, every other layer global, dropouts
CONFIGS = {
    "plain": dict(vocab_size=120, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=48,
                  local_attention=8, global_attn_every_n_layers=3, global_rope_theta=5000.0, local_rope_theta=500.0),
    "biased": dict(vocab_size=120, hidden_size=48, num_hidden_layers=4, num_attention_heads=4, intermediate_size=40,
                   local_attention=6, global_attn_every_n_layers=2, norm_bias=True, attention_bias=True,
                   mlp_bias=True, classifier_bias=True, decoder_bias=False, hidden_activation="silu",
                   classifier_activation="gelu_pytorch_tanh", classifier_pooling="mean", num_labels=3,
                   classifier_dropout=0.1, embedding_dropout=0.1, mlp_dropout=0.1, attention_dropout=0.1),
}
CLASSES = (transformers.ModernBertForQuestionAnswering, transformers.ModernBertForTokenClassification,
           transformers.ModernBertForSequenceClassification)


def hf_config(name: str, **changes) -> transformers.ModernBertConfig:
    return transformers.ModernBertConfig(**{**CONFIGS[name], **TOKENS, **changes})



def batch(padded: bool, seq_len: int = 24) -> dict[str, torch.Tensor]:
    """Two rows of ``seq_len`` tokens; ``padded``: the second padded after 9."""
    ids = torch.randint(3, 120, (2, seq_len), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    if padded:
        ids[1, 9:], mask[1, 9:] = 0, 0
    return {"input_ids": ids, "attention_mask": mask}


def run(model, inputs, ours: bool, **flags):
    """(hidden states, attentions, the head's logits or None) of one model."""
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True, output_attentions=True, **flags)
    encoder = out.encoder if ours else out
    if ours:
        out = next((r for r in (out.mlm, out.qa, out.token_classifier, out.classifier) if r is not None), None)
    if hasattr(out, "start_logits"):
        logits = torch.stack((out.start_logits, out.end_logits), -1)                  # (B, S, 2)
    else:
        logits = getattr(out, "logits", None)
    return encoder.hidden_states, encoder.attentions, logits


def differences(ours, theirs, keep: torch.Tensor) -> tuple[float, float, float]:
    """Max |diff| of the hidden states (real positions), the attention maps (all) and the logits (real positions
    for per-token logits)."""
    (h1, a1, l1), (h2, a2, l2) = ours, theirs
    assert len(h1) == len(h2) == 5 and len(a1) == len(a2) == 4
    rows = keep.bool()
    hidden = max(float((x[rows] - y[rows]).abs().max()) for x, y in zip(h1, h2))
    maps = max(float((x - y).abs().max()) for x, y in zip(a1, a2))
    if l2 is None:
        return hidden, maps, 0.0
    if l1.dim() >= 2 and l1.shape[:2] == rows.shape:
        l1, l2 = l1[rows], l2[rows]
    return hidden, maps, float((l1 - l2).abs().max()) / max(1.0, float(l2.abs().max()))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_masked_lm_matches_transformers_padded_or_not_and_exports_back(name, tmp_path):
    theirs = randomized(transformers.ModernBertForMaskedLM, hf_config(name))
    theirs.save_pretrained(tmp_path / "theirs")
    loaded = load(tmp_path / "theirs")
    assert loaded.config.model_type == "modernbert" and loaded.heads == ("mlm",) and loaded.ignored_keys == []
    assert loaded.config.family_options["local_attention"] == CONFIGS[name]["local_attention"]
    for padded in (False, True):
        inputs = batch(padded)
        expected = run(theirs, inputs, ours=False)
        assert max(differences(run(loaded.model, inputs, ours=True), expected, inputs["attention_mask"])) <= TOL
        # the window matters: beyond it, the first row's maps are zero in a local layer (1), not in a global one (0)
        window = CONFIGS[name]["local_attention"] // 2
        far = (torch.arange(24)[:, None] - torch.arange(24)[None, :]).abs() > window      # (S, S)
        local, glob = expected[1][1][0], expected[1][0][0]                                # (nh, S, S)
        assert float(local[:, far].abs().max()) == 0.0 and float(glob[:, far].abs().min()) > 0.0

    save(loaded.model, loaded.tokenizer, tmp_path / "ours")
    back, info = transformers.ModernBertForMaskedLM.from_pretrained(tmp_path / "ours", attn_implementation="eager",
                                                                    output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert back.config.layer_types == theirs.config.layer_types
    assert back.config.rope_parameters == theirs.config.rope_parameters
    inputs = batch(padded=True)
    assert max(differences(run(back.eval(), inputs, ours=False), run(theirs, inputs, ours=False),
                           inputs["attention_mask"])) <= TOL


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_task_heads_match_transformers_and_export_back(name, cls, tmp_path):
    config = hf_config(name, **({"num_labels": 2} if cls is transformers.ModernBertForQuestionAnswering else {}))
    theirs = randomized(cls, config, seed=1)
    theirs.save_pretrained(tmp_path / "theirs")
    loaded = load(tmp_path / "theirs")
    assert len(loaded.heads) == 1 and loaded.ignored_keys == []
    inputs = batch(padded=True)
    expected = run(theirs, inputs, ours=False)
    assert max(differences(run(loaded.model, inputs, ours=True), expected, inputs["attention_mask"])) <= TOL
    save(loaded.model, loaded.tokenizer, tmp_path / "ours")
    back, info = cls.from_pretrained(tmp_path / "ours", attn_implementation="eager", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert max(differences(run(back.eval(), inputs, ours=False), expected, inputs["attention_mask"])) <= TOL


@pytest.mark.parametrize("cls", (transformers.ModernBertForMaskedLM, *CLASSES), ids=lambda c: c.__name__)
def test_in_training_every_dropout_sits_where_transformers_puts_it(cls, tmp_path):
    """Every dropout at 0.1, training mode, one seed: the explicit path draws transformers' masks in transformers'
    order (embeddings, probabilities, after Wo, in the MLP, after a head's prediction head), so the logits agree."""
    config = hf_config("biased", **({"num_labels": 2} if cls is transformers.ModernBertForQuestionAnswering else {}))
    theirs = randomized(cls, config)
    theirs.save_pretrained(tmp_path)
    ours = load(tmp_path).model
    inputs = batch(padded=True)
    logits = []
    for model in (theirs.train(), ours.train()):
        torch.manual_seed(5)
        with torch.no_grad():
            logits.append(run(model, inputs, ours=model is ours)[2])
    keep = inputs["attention_mask"].bool()
    expected, got = (l[keep] if l.shape[:2] == keep.shape else l for l in logits)
    assert float((got - expected).abs().max()) <= TOL
    torch.manual_seed(5)
    with torch.no_grad():
        assert float((run(theirs.eval(), inputs, ours=False)[2] - logits[0]).abs().max()) > 1e-3   # it dropped


def test_the_bare_model_loads_and_a_class_not_read_loads_as_its_encoder(tmp_path):
    """``ModernBertModel`` gives transformers' numbers; a multiple-choice file's encoder loads, its head's keys
    listed as ignored, never read as another head."""
    config = hf_config("plain")
    theirs = randomized(transformers.ModernBertModel, config)
    theirs.save_pretrained(tmp_path / "bare")
    loaded = load(tmp_path / "bare")
    assert loaded.heads == () and not loaded.model.has_pooler
    inputs = batch(padded=True)
    assert max(differences(run(loaded.model, inputs, ours=True), run(theirs, inputs, ours=False),
                           inputs["attention_mask"])) <= TOL
    randomized(transformers.ModernBertForMultipleChoice, hf_config("plain")).save_pretrained(tmp_path / "choice")
    loaded = load(tmp_path / "choice")
    assert loaded.heads == () and {k.split(".")[0] for k in loaded.ignored_keys} == {"head", "classifier"}


def test_fp16_shards_load_to_the_numbers_of_the_fp16_weights(tmp_path):
    theirs = randomized(transformers.ModernBertForMaskedLM, hf_config("biased")).half()
    theirs.save_pretrained(tmp_path / "half", max_shard_size="20KB")
    assert len(list((tmp_path / "half").glob("*.safetensors"))) > 1
    loaded = load(tmp_path / "half")
    # the reference reads the same files in fp32 (``theirs.float()`` would keep its rotary frequencies rounded to fp16)
    reference = transformers.ModernBertForMaskedLM.from_pretrained(tmp_path / "half", dtype=torch.float32,
                                                                   attn_implementation="eager").eval()
    inputs = batch(padded=True)
    assert max(differences(run(loaded.model, inputs, ours=True), run(reference, inputs, ours=False),
                           inputs["attention_mask"])) <= TOL


def test_fast_path_qk_and_head_mask_agree_with_their_definitions(tmp_path):
    """The fast path equals the explicit one; ``output_qk``'s rotated queries and keys give the scores and
    probabilities (with the window's mask); masking a head equals zeroing its value projection."""
    randomized(transformers.ModernBertForMaskedLM, hf_config("plain")).save_pretrained(tmp_path)
    model = load(tmp_path).model
    inputs = batch(padded=True)
    with torch.no_grad():
        fast = model(**inputs).mlm.logits
        explicit = model(**inputs, output_attentions=True, output_qk=True)
    keep = inputs["attention_mask"].bool()
    assert float((fast[keep] - explicit.mlm.logits[keep]).abs().max()) <= 1e-5
    encoder = explicit.encoder
    for q, k, scores, probs in zip(encoder.queries, encoder.keys, encoder.attention_scores, encoder.attentions):
        raw = q @ k.transpose(-1, -2) / 8 ** 0.5                                       # (B, nh, S, S), hd = 8
        allowed = scores > -1e30
        assert float((scores[allowed] - raw[allowed]).abs().max()) <= 1e-5
        assert float((torch.softmax(scores, -1) - probs).abs().max()) <= 1e-6
    assert not bool((encoder.attention_scores[1] > -1e30).all())                       # a local layer drops some

    head_mask = torch.ones(4, 4)
    head_mask[2, 1] = 0.0
    cut = copy.deepcopy(model)
    with torch.no_grad():
        cut.bert.layers[2].attn.Wqkv.weight[2 * 32 + 8:2 * 32 + 16] = 0.0              # layer 2, head 1's values
        expected = cut(**inputs).mlm.logits
        masked_fast = model(**inputs, head_mask=head_mask).mlm.logits
        masked = model(**inputs, head_mask=head_mask, output_attentions=True)
    assert float((masked.encoder.attentions[2][:, 1]).abs().max()) == 0.0
    for logits in (masked_fast, masked.mlm.logits):
        assert float((logits[keep] - expected[keep]).abs().max()) <= 1e-5


def test_config_round_trip_and_size_bound():
    config = config_from_dict({**hf_config("biased").to_dict(), "architectures": ["ModernBertForMaskedLM"]})
    assert config_from_dict(config_to_dict(config)) == config
    assert config.classifier_dropout == config.hidden_dropout_prob == 0.1 and config.type_vocab_size == 0
    model = BertWithHeads(config, heads=("mlm",))
    assert config_size_lower_bound(config) <= parameter_count(model)


@pytest.mark.parametrize("field, value, message", [
    ("classifier_pooling", "max", "classifier_pooling must be 'cls' or 'mean'"),
    ("local_attention", 0, "local_attention must be a positive whole number"),
    ("layer_types", ["full_attention"], "names 1 layers, but num_hidden_layers is 4"),
    ("layer_types", ["full_attention", "windowed", "full_attention", "full_attention"], "layer_types must list"),
    ("rope_parameters", {"full_attention": {"rope_type": "yarn", "rope_theta": 1e4}}, "rope_type 'yarn'"),
    ("rope_scaling", {"type": "linear", "factor": 2.0}, "rope_scaling"),
    ("global_rope_theta", "big", "global_rope_theta \\(a rotary base\\) must be a number above 1"),
    ("hidden_activation", "gelu_fast", "hidden_activation 'gelu_fast' is not one this app computes"),
    ("tie_word_embeddings", False, "not tied to its token embeddings"),
    ("norm_bias", "yes", "norm_bias must be true or false"),
    ("head_dim", 16, "head_dim \\(16\\) is not hidden_size / num_attention_heads"),
    ("num_hidden_layers", 10**9, "more than this app builds"),
])
def test_what_is_not_read_is_refused_with_a_sentence(field, value, message):
    data = {**CONFIGS["plain"], **TOKENS, "model_type": "modernbert", field: value}
    with pytest.raises(ValueError, match=message):
        config_from_dict(data)


def test_bad_family_options_and_two_heads_in_one_export_are_refused(tmp_path):
    good = config_from_dict({**CONFIGS["plain"], **TOKENS, "model_type": "modernbert"})
    for options, message in (({**good.family_options, "window": 3}, "ModernBERT has no option 'window'"),
                             ({**good.family_options, "embedding_dropout": 1.5}, "embedding_dropout must be in")):
        with pytest.raises(ValueError, match=message):
            BertWithHeads(good.replace(family_options=options), heads=("mlm",))
    with pytest.raises(ValueError, match="family_options must be a dict"):
        BertConfig(model_type="modernbert", family_options=[])
    model = BertWithHeads(good, heads=("mlm", "qa"))
    with pytest.raises(ValueError, match="holds one task head"):
        save(model, None, tmp_path / "both")
    save(model, None, tmp_path / "qa", architectures=["BertForQuestionAnswering"])
    back, info = transformers.ModernBertForQuestionAnswering.from_pretrained(tmp_path / "qa",
                                                                            output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
