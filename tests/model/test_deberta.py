"""DeBERTa-v2/v3 (docs/design/families.md): a random model saved by ``transformers`` (eager attention) loads through
``engine.load`` and gives transformers' hidden states, every layer's attention map and the head logits within 1e-5
on a padded batch of 24 tokens (position buckets of 4: most distances fall in log buckets); fp16 in shards too; our
export loads back into transformers' class with nothing missing or unexpected and the same logits. The attention's
scores equal their definition (content + c2p + p2c over the relative embeddings, scaled by sqrt(3 hd)), the fast
path agrees with the explicit one, ``head_mask`` is what scaling a head's values gives, and what this project does
not compute is refused with a sentence."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import transformers
from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

from engine.checkpoints.hf_format import load, save
from engine.checkpoints.model_fit import config_size_lower_bound, parameter_count
from engine.model.deberta_attention import log_buckets, relative_index
from engine.model.families.registry import config_from_dict
from engine.model.heads import BertWithHeads
from support.reference import PATHS, check, randomized

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = 1e-5
V3 = dict(relative_attention=True, position_buckets=4, max_relative_positions=16, pos_att_type=["p2c", "c2p"],
          share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False)
CASES = {
    # DeBERTa-v3's shape: shared keys, log buckets, LayerNorm on the relative embeddings, no absolute positions
    "v3": dict(V3, hidden_size=32, num_hidden_layers=4),
    # DeBERTa-v3's own masked-LM layout (lm_predictions.lm_head), read into the shared head
    "v3-own-head": dict(V3, hidden_size=32, num_hidden_layers=2, legacy=False),
    # separate position projections, E < H, segments and absolute positions, the '|' string form
    "separate-keys": dict(relative_attention=True, position_buckets=6, max_relative_positions=12,
                          pos_att_type="c2p|p2c", share_att_key=False, hidden_size=48, num_hidden_layers=3,
                          embedding_size=16, type_vocab_size=2, position_biased_input=True),
    # DeBERTa-v2's convolution beside the first layer, c2p alone, clamped distances without buckets
    "conv": dict(relative_attention=True, max_relative_positions=8, pos_att_type=["c2p"], hidden_size=64,
                 num_hidden_layers=2, conv_kernel_size=3, conv_groups=2, conv_act="gelu", position_biased_input=False),
}


def deberta_config(case: str, **overrides) -> transformers.DebertaV2Config:
    values = dict(vocab_size=120, num_attention_heads=4, intermediate_size=48, max_position_embeddings=40)
    return transformers.DebertaV2Config(**{**values, **CASES[case], **overrides})



def padded_batch(config, seq_len: int = 24, choices: int | None = None) -> dict[str, torch.Tensor]:
    """Rows of ``seq_len`` tokens, the last padded after 9 (segment ids when the model has them);
    (B, C, S) with ``choices``."""
    generator = torch.Generator().manual_seed(1)
    shape = (2, seq_len) if choices is None else (2, choices, seq_len)
    ids = torch.randint(3, config.vocab_size, shape, generator=generator)
    mask = torch.ones_like(ids)
    ids[..., -1, 9:], mask[..., -1, 9:] = config.pad_token_id, 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    if config.type_vocab_size:
        inputs["token_type_ids"] = (torch.arange(seq_len) >= seq_len // 2).long().expand(shape)
    return inputs


def outputs(model, inputs, ours: bool):
    """(hidden states, attentions, the head's logits) of one model on ``inputs``."""
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True, output_attentions=True)
    if ours:
        encoder = out.encoder
        out = next(r for r in (out.mlm, out.qa, out.token_classifier, out.classifier, out.multiple_choice) if r)
    else:
        encoder = out
    logits = out.logits if hasattr(out, "logits") else torch.stack((out.start_logits, out.end_logits))
    return encoder.hidden_states, encoder.attentions, logits


def assert_same(ours, theirs, keep: torch.Tensor) -> float:
    """Every hidden state (at real tokens), attention map (all of it) and logit within ``TOL``; the largest
    difference."""
    (h1, a1, l1), (h2, a2, l2) = ours, theirs
    assert len(h1) == len(h2) and len(a1) == len(a2) and a1[0].shape == a2[0].shape
    rows = keep.reshape(-1, keep.size(-1)).bool()                     # (B, S) or (B*C, S)
    diffs = [float((x[rows] - y[rows]).abs().max()) for x, y in zip(h1, h2)]
    diffs += [float((x - y).abs().max()) for x, y in zip(a1, a2)]
    if l1.dim() == 3 and l1.shape[:2] == rows.shape:
        l1, l2 = l1[rows], l2[rows]
    diffs.append(float((l1 - l2).abs().max()) / max(1.0, float(l2.abs().max())))
    assert max(diffs) <= TOL, diffs
    return max(diffs)


@pytest.mark.parametrize("case", list(CASES))
def test_a_deberta_loads_and_matches_transformers_then_exports_back(case, tmp_path):
    config = deberta_config(case)
    theirs = randomized(transformers.DebertaV2ForMaskedLM, config)
    theirs.save_pretrained(tmp_path / "theirs")
    loaded = load(tmp_path / "theirs")
    assert loaded.config.model_type == "deberta-v2" and loaded.heads == ("mlm",) and loaded.ignored_keys == []
    inputs = padded_batch(config)
    expected = outputs(theirs, inputs, ours=False)
    assert_same(outputs(loaded.model, inputs, ours=True), expected, inputs["attention_mask"])

    save(loaded.model, loaded.tokenizer, tmp_path / "ours")
    back, info = transformers.DebertaV2ForMaskedLM.from_pretrained(
        tmp_path / "ours", attn_implementation="eager", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert back.config.pos_att_type == loaded.config.family_options["pos_att_type"]
    assert_same(outputs(back.eval(), inputs, ours=False), expected, inputs["attention_mask"])


TASKS = [(transformers.DebertaV2ForQuestionAnswering, "qa", "v3"),
         (transformers.DebertaV2ForTokenClassification, "token_classifier", "separate-keys"),
         (transformers.DebertaV2ForSequenceClassification, "classifier", "v3"),
         (transformers.DebertaV2ForMultipleChoice, "multiple_choice", "separate-keys")]


@pytest.mark.parametrize("cls, head, case", TASKS, ids=[t[1] for t in TASKS])
def test_each_task_head_matches_transformers_and_exports_back(cls, head, case, tmp_path):
    """QA, token classification, and the two heads on DeBERTa's ContextPooler (``pooler.dense`` on the first
    token, GELU), the classifiers with ``num_labels`` 3; multiple choice on (B, C, S) input."""
    config = deberta_config(case, num_labels=2 if head == "qa" else 3, pooler_hidden_act="gelu")
    theirs = randomized(cls, config, seed=2)
    theirs.save_pretrained(tmp_path / "theirs")
    loaded = load(tmp_path / "theirs")
    assert loaded.heads == (head,) and loaded.ignored_keys == []
    inputs = padded_batch(config, choices=3 if head == "multiple_choice" else None)
    expected = outputs(theirs, inputs, ours=False)
    assert_same(outputs(loaded.model, inputs, ours=True), expected, inputs["attention_mask"])
    save(loaded.model, loaded.tokenizer, tmp_path / "ours")
    back, info = cls.from_pretrained(tmp_path / "ours", attn_implementation="eager", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert_same(outputs(back.eval(), inputs, ours=False), expected, inputs["attention_mask"])


def test_fp16_sharded_files_load_to_the_numbers_of_the_fp16_weights(tmp_path):
    config = deberta_config("v3")
    theirs = randomized(transformers.DebertaV2ForMaskedLM, config).half()
    theirs.save_pretrained(tmp_path / "half", max_shard_size="20KB")
    assert len(list((tmp_path / "half").glob("*.safetensors"))) > 1
    loaded = load(tmp_path / "half")
    inputs = padded_batch(config)
    assert_same(outputs(loaded.model, inputs, ours=True), outputs(theirs.float(), inputs, ours=False),
                inputs["attention_mask"])


def test_a_file_as_deberta_v3_is_published_loads_its_unused_keys_listed_as_ignored(tmp_path):
    """DeBERTa-v3's files hold an absolute position table it never adds (position_biased_input false) and the
    replaced-token detector (``mask_predictions``) beside ``lm_predictions``: both are listed as ignored, as
    transformers ignores them, and the numbers are transformers'."""
    from safetensors.torch import load_file, save_file

    config = deberta_config("v3-own-head")
    theirs = randomized(transformers.DebertaV2ForMaskedLM, config)
    theirs.save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    extra = {"deberta.embeddings.position_embeddings.weight": torch.randn(40, 32),
             "mask_predictions.dense.weight": torch.randn(32, 32), "mask_predictions.classifier.bias": torch.randn(1)}
    save_file({**state, **extra}, tmp_path / "model.safetensors", metadata={"format": "pt"})
    loaded = load(tmp_path)
    assert loaded.heads == ("mlm",) and sorted(loaded.ignored_keys) == sorted(extra)
    inputs = padded_batch(config)
    assert_same(outputs(loaded.model, inputs, ours=True), outputs(theirs, inputs, ours=False), inputs["attention_mask"])


@pytest.mark.parametrize("buckets, max_position", [(4, 16), (6, 12), (8, 64), (256, 512), (2, 5)])
def test_log_buckets_are_transformers_relative_positions(buckets, max_position):
    x = torch.zeros(1, 700, 1)
    expected = build_relative_position(x, x, bucket_size=buckets, max_position=max_position)[0]     # (S, S)
    relative = torch.arange(700)[:, None] - torch.arange(700)[None, :]
    assert torch.equal(log_buckets(relative, buckets, max_position), expected)


def _loaded(case: str, tmp_path, cls=transformers.DebertaV2ForMaskedLM, **overrides):
    config = deberta_config(case, **overrides)
    randomized(cls, config).save_pretrained(tmp_path / case)
    return load(tmp_path / case), padded_batch(config)


@pytest.mark.parametrize("case", ["v3", "separate-keys"])
def test_scores_are_the_disentangled_definition_and_the_paths_agree(case, tmp_path):
    """Each layer's scores are (q_i·k_j + q_i·Kr[δ(i,j)] + k_j·Qr[δ(i,j)]) / sqrt(3 hd) at real tokens, written
    with indexing (no gather); softmax of them is the attention map; the fast path's hidden states are the
    explicit path's."""
    loaded, inputs = _loaded(case, tmp_path)
    model = loaded.model.bert
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True, output_qk=True, output_attentions=True)
        fast = model(**inputs, output_hidden_states=True)
        table, _ = model.encoder.relative(24, torch.device("cpu"))                   # (2 span, H)
    options = loaded.config.family_options
    span = options["position_buckets"]                                               # both cases bucket
    index = relative_index(24, span, span,
                           options["max_relative_positions"])                        # (S, S)
    real = inputs["attention_mask"].bool()
    for layer, attention in enumerate(model.encoder.layer):
        own = attention.attention.self
        pos_key = (own.key_proj if own.share_att_key else own.pos_key_proj)(table)   # (2 span, H)
        pos_query = (own.query_proj if own.share_att_key else own.pos_query_proj)(table)
        q, k = out.queries[layer], out.keys[layer]                                  # (B, nh, S, hd)
        pos_key = pos_key.view(-1, 4, q.size(-1))[index].permute(2, 0, 1, 3)        # (nh, S, S, hd)
        pos_query = pos_query.view(-1, 4, q.size(-1))[index].permute(2, 0, 1, 3)    # (nh, S, S, hd)
        expected = (q @ k.transpose(-1, -2) + torch.einsum("bhid,hijd->bhij", q, pos_key)
                    + torch.einsum("bhjd,hijd->bhij", k, pos_query)) / math.sqrt(3 * q.size(-1))
        for row in range(2):
            n = int(real[row].sum())
            check(f"{case} scores {layer}", out.attention_scores[layer][row, :, :n, :n], expected[row, :, :n, :n],
                  PATHS)
        check(f"{case} softmax {layer}", torch.softmax(out.attention_scores[layer], -1), out.attentions[layer], PATHS)
    for explicit, quick in zip(out.hidden_states, fast.hidden_states):
        check(f"{case} fast vs explicit", quick[real], explicit[real], 4 * PATHS)


@pytest.mark.parametrize("explicit", [False, True])
def test_head_mask_is_scaling_that_heads_values(explicit, tmp_path):
    """A (L, nh) head_mask (a zero, a 0.5) gives the model whose value_proj rows of that head are scaled so; the
    explicit path reports the probabilities scaled; a (nh,) mask serves every layer."""
    loaded, inputs = _loaded("v3", tmp_path)
    model = loaded.model
    mask = torch.ones(4, 4)
    mask[0, 1], mask[2, 3], mask[3] = 0.0, 0.5, torch.tensor([1.0, 0.0, 1.0, 1.0])
    reference = copy.deepcopy(model)
    with torch.no_grad():
        for layer, scale in zip(reference.bert.encoder.layer, mask):
            value = layer.attention.self.value_proj
            rows = scale.repeat_interleave(8)                                        # (H,): hd = 8 per head
            value.weight.mul_(rows[:, None])
            value.bias.mul_(rows)
        got = model(**inputs, head_mask=mask, output_hidden_states=True, output_attentions=explicit)
        want = reference(**inputs, output_hidden_states=True, output_attentions=explicit)
        every = model(**inputs, head_mask=mask[3], output_hidden_states=True)
        want_every = model(**inputs, head_mask=mask[3].expand(4, 4), output_hidden_states=True)
    for a, b in zip(got.encoder.hidden_states, want.encoder.hidden_states):
        check(f"head_mask explicit={explicit}", a, b, 4 * PATHS)
    check("head_mask logits", got.mlm.logits, want.mlm.logits, 10 * PATHS)
    check("(nh,) head_mask", every.encoder.last_hidden_state, want_every.encoder.last_hidden_state, 0.0)
    if explicit:
        for layer, (probs, plain) in enumerate(zip(got.encoder.attentions, want.encoder.attentions)):
            check(f"masked probs {layer}", probs, plain * mask[layer].view(1, 4, 1, 1), PATHS)


def test_on_layer_hands_over_each_layers_probes_and_training_matches_transformers_loss(tmp_path):
    loaded, inputs = _loaded("separate-keys", tmp_path)
    seen: list[tuple[int, tuple[int, ...]]] = []
    with torch.no_grad():
        out = loaded.model.bert(**inputs, output_attentions=True, output_qk=True,
                                on_layer=lambda i, probes: seen.append((i, tuple(probes["probs"].shape))))
    assert seen == [(i, (2, 4, 24, 24)) for i in range(3)] and out.attentions == () and out.attention_scores == ()

    config = deberta_config("separate-keys")
    theirs = randomized(transformers.DebertaV2ForMaskedLM, config)
    labels = torch.full_like(inputs["input_ids"], -100)
    labels[:, 3:6] = inputs["input_ids"][:, 3:6]
    expected = theirs(**inputs, labels=labels).loss
    model = loaded.model
    loss = model(**inputs, labels=labels).loss
    assert abs(loss.item() - expected.item()) <= TOL * max(1.0, expected.item())
    loss.backward()
    encoder = model.bert.encoder
    for parameter in (encoder.rel_embeddings.weight, encoder.layer[0].attention.self.pos_key_proj.weight,
                      encoder.layer[-1].attention.self.pos_query_proj.weight, model.bert.embeddings.embed_proj.weight):
        assert parameter.grad is not None and float(parameter.grad.abs().max()) > 0


@pytest.mark.parametrize("case", list(CASES))
def test_a_model_made_here_exports_as_transformers_classes_and_the_size_check_is_a_lower_bound(case, tmp_path):
    """Built from a config here (no heads: the pooler is made, and left out of the bare DebertaV2Model), saved, and
    loaded by transformers with nothing missing or unexpected; ``config_size_lower_bound`` never exceeds the count."""
    config = config_from_dict({"model_type": "deberta-v2", **deberta_config(case).to_dict()})
    torch.manual_seed(3)
    model = BertWithHeads(config, heads=()).eval()
    assert model.has_pooler and config_size_lower_bound(config) <= parameter_count(model)
    save(model, None, tmp_path / "bare")
    back, info = transformers.DebertaV2Model.from_pretrained(tmp_path / "bare", output_loading_info=True,
                                                             attn_implementation="eager")
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    inputs = padded_batch(config)
    with torch.no_grad():
        ours, theirs = model(**inputs).encoder.last_hidden_state, back.eval()(**inputs).last_hidden_state
    real = inputs["attention_mask"].bool()
    assert float((ours[real] - theirs[real]).abs().max()) <= TOL


@pytest.mark.parametrize("fields, match", [
    ({"model_type": "deberta"}, r"model_type 'deberta', a family this app does not read.*DeBERTa-v2/v3 "
                                r"\('deberta-v2'\)"),
    ({"pos_att_type": ["c2p", "p2p"]}, r"pos_att_type holds 'p2p', which this app does not compute"),
    ({"pos_att_type": 3}, "pos_att_type must be a list of names"),
    ({"relative_attention": "yes"}, "relative_attention must be true or false"),
    ({"relative_attention": True, "position_buckets": 64, "max_relative_positions": 20}, "position_buckets"),
    ({"conv_kernel_size": 4}, "conv_kernel_size must be 0 or an odd number"),
    ({"conv_kernel_size": 3, "conv_groups": 5}, r"conv_groups \(5\) must divide hidden_size"),
    ({"attention_head_size": 16}, "attention_head_size"),
    ({"pooler_hidden_size": 64}, "pooler_hidden_size"),
    ({"legacy": False, "embedding_size": 16}, "legacy false"),
    ({"norm_rel_ebd": "batch_norm"}, "norm_rel_ebd holds 'batch_norm'"),
    ({"pooler_hidden_act": "mish"}, "pooler_hidden_act 'mish' is not one this app computes"),
])
def test_what_is_not_computed_is_refused_with_a_sentence(fields, match):
    data = {"model_type": "deberta-v2", "hidden_size": 32, "num_attention_heads": 4, **fields}
    with pytest.raises(ValueError, match=match):
        config_from_dict(data)
