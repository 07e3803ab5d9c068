"""The BERT family at the door (docs/design/families.md): a random model of each family, saved by ``transformers``
in its own layout (fp32 and fp16, whole and sharded), loads through ``engine.load`` and gives transformers'
hidden states, attention maps and head logits (eager attention, fp32) within 1e-5, on a padded batch; our export
loads back into the family's own transformers class with nothing missing or unexpected and the same logits.
Awkward configurations: ALBERT with several layer groups and E != H, ELECTRA with E < H, RoBERTa's positions
after the padding id (max_position_embeddings = tokens + 2), XLM-R's larger vocabulary, DistilBERT without
segments."""
from __future__ import annotations

import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load, save
from engine.model.families.registry import FAMILIES, config_from_dict, family_of
from support.reference import randomized

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = 1e-5
SHAPE = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=48)

# (name, transformers config, the masked-LM class, the other task classes read)
CASES = {
    "roberta": (transformers.RobertaConfig(vocab_size=120, max_position_embeddings=26, **SHAPE),
                transformers.RobertaForMaskedLM,
                (transformers.RobertaForQuestionAnswering, transformers.RobertaForTokenClassification)),
    "xlm-roberta": (transformers.XLMRobertaConfig(vocab_size=900, max_position_embeddings=40, **SHAPE),
                    transformers.XLMRobertaForMaskedLM, (transformers.XLMRobertaForQuestionAnswering,)),
    "distilbert": (transformers.DistilBertConfig(vocab_size=120, dim=32, n_layers=3, n_heads=4, hidden_dim=48,
                                                 max_position_embeddings=40),
                   transformers.DistilBertForMaskedLM,
                   (transformers.DistilBertForQuestionAnswering, transformers.DistilBertForTokenClassification)),
    "electra": (transformers.ElectraConfig(vocab_size=120, embedding_size=16, max_position_embeddings=40, **SHAPE),
                transformers.ElectraForMaskedLM,
                (transformers.ElectraForQuestionAnswering, transformers.ElectraForTokenClassification)),
    "albert": (transformers.AlbertConfig(vocab_size=120, embedding_size=16, num_hidden_groups=2,
                                         max_position_embeddings=40, **SHAPE),
               transformers.AlbertForMaskedLM,
               (transformers.AlbertForQuestionAnswering, transformers.AlbertForSequenceClassification)),
}



def padded_batch(config, seq_len: int = 24) -> dict[str, torch.Tensor]:
    """Two rows: one full (``seq_len`` tokens), one padded after 9; ids avoid the padding id."""
    pad = config.pad_token_id
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, config.vocab_size, (2, seq_len), generator=generator)
    ids[ids == pad] = pad + 1
    mask = torch.ones_like(ids)
    ids[1, 9:], mask[1, 9:] = pad, 0
    return {"input_ids": ids, "attention_mask": mask}


def outputs(model, inputs, ours: bool):
    """(hidden states, attentions, the head's logits) of one model on ``inputs``."""
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True, output_attentions=True)
    if ours:
        encoder, head = out.encoder, next(r for r in (out.mlm, out.qa, out.token_classifier, out.classifier) if r)
        logits = head.logits if hasattr(head, "logits") else torch.stack((head.start_logits, head.end_logits))
        return encoder.hidden_states, encoder.attentions, logits
    logits = out.logits if hasattr(out, "logits") else torch.stack((out.start_logits, out.end_logits))
    return out.hidden_states, out.attentions, logits


def assert_same(ours, theirs, keep: torch.Tensor) -> None:
    """Every hidden state, attention map and logit within ``TOL`` (padding positions of hidden states and logits
    left out: they are computed from nothing)."""
    (h1, a1, l1), (h2, a2, l2) = ours, theirs
    assert len(h1) == len(h2) and len(a1) == len(a2)
    rows = keep.bool()
    for x, y in zip(h1, h2):
        assert (x[rows] - y[rows]).abs().max() <= TOL
    for x, y in zip(a1, a2):
        assert (x - y).abs().max() <= TOL
    l1, l2 = (l.float() for l in (l1, l2))
    if l1.dim() == 3 and l1.shape[:2] == rows.shape:
        l1, l2 = l1[rows], l2[rows]
    assert (l1 - l2).abs().max() <= TOL * max(1.0, float(l2.abs().max()))


@pytest.mark.parametrize("name", list(CASES))
def test_each_family_loads_and_matches_transformers_then_exports_back(name, tmp_path):
    config, mlm_class, _ = CASES[name]
    theirs = randomized(mlm_class, config)
    theirs.save_pretrained(tmp_path / "theirs")
    loaded = load(tmp_path / "theirs")
    assert loaded.config.model_type == name and family_of(name) is FAMILIES[name]
    assert loaded.heads == ("mlm",) and loaded.ignored_keys == []
    inputs = padded_batch(config)
    expected = outputs(theirs, inputs, ours=False)
    assert_same(outputs(loaded.model, inputs, ours=True), expected, inputs["attention_mask"])

    save(loaded.model, loaded.tokenizer, tmp_path / "ours")                             # our export, in the family's layout
    back, info = mlm_class.from_pretrained(tmp_path / "ours", attn_implementation="eager", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert type(back).__name__ == mlm_class.__name__
    assert_same(outputs(back.eval(), inputs, ours=False), expected, inputs["attention_mask"])


@pytest.mark.parametrize("name", list(CASES))
def test_each_familys_task_heads_match_transformers(name, tmp_path):
    config, _, classes = CASES[name]
    for index, cls in enumerate(classes):
        theirs = randomized(cls, config, seed=index + 1)
        theirs.save_pretrained(tmp_path / cls.__name__)
        loaded = load(tmp_path / cls.__name__)
        inputs = padded_batch(config)
        assert_same(outputs(loaded.model, inputs, ours=True), outputs(theirs, inputs, ours=False),
                    inputs["attention_mask"])


@pytest.mark.parametrize("name", ["roberta", "albert"])
def test_fp16_and_sharded_files_load_to_the_same_numbers(name, tmp_path):
    """Saved in float16 in shards of 20 KB: read and widened to fp32, the numbers of the fp16 weights."""
    config, mlm_class, _ = CASES[name]
    theirs = randomized(mlm_class, config).half()
    theirs.save_pretrained(tmp_path / "half", max_shard_size="20KB")
    assert len(list((tmp_path / "half").glob("*.safetensors"))) > 1
    loaded = load(tmp_path / "half")
    theirs = theirs.float()
    inputs = padded_batch(config)
    assert_same(outputs(loaded.model, inputs, ours=True), outputs(theirs, inputs, ours=False),
                inputs["attention_mask"])


def test_a_berts_weights_under_another_familys_config_are_named_as_that_family_names_them(tmp_path):
    """A BERT folder whose config.json says RoBERTa is read as a RoBERTa: its weights are missing, named as RoBERTa's
    files name them; a family no module reads is refused naming those read."""
    import json

    randomized(transformers.BertForMaskedLM, transformers.BertConfig(vocab_size=120, max_position_embeddings=40,
                                                                     **{**SHAPE, "num_hidden_layers": 2})
               ).save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**data, "model_type": "roberta"}))
    with pytest.raises(ValueError, match=r"incomplete for a 2-layer RoBERTa; missing roberta\.embeddings\."):
        load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**data, "model_type": "gpt2"}))
    with pytest.raises(ValueError, match="model_type 'gpt2', a family this app does not read; it reads BERT"):
        load(tmp_path)


def test_heads_not_read_yet_are_dropped_by_name_and_odd_configs_refused(tmp_path):
    """A key no head reads (one added to a RoBERTa's file): the model loads, the key is listed as ignored; an ALBERT
    with two inner layers a group, a sinusoidal DistilBERT and an unknown family are refused with a sentence."""
    from safetensors.torch import load_file, save_file

    config = CASES["roberta"][0]
    randomized(transformers.RobertaForMaskedLM, config).save_pretrained(tmp_path / "extra")
    weights = tmp_path / "extra" / "model.safetensors"
    save_file({**load_file(weights), "unread_head.weight": torch.zeros(2, 32)}, weights, metadata={"format": "pt"})
    loaded = load(tmp_path / "extra")
    assert loaded.heads == ("mlm",) and loaded.ignored_keys == ["unread_head.weight"]
    with pytest.raises(ValueError, match="inner_group_num"):
        config_from_dict({"model_type": "albert", "inner_group_num": 2, "hidden_size": 32, "num_attention_heads": 4})
    with pytest.raises(ValueError, match="sinusoidal"):
        config_from_dict({"model_type": "distilbert", "sinusoidal_pos_embds": True})
    with pytest.raises(ValueError, match="model_type 'gpt2'.*RoBERTa \\('roberta'\\)"):
        config_from_dict({"model_type": "gpt2"})
    with pytest.raises(ValueError, match=r"pad_token_id \(600\) leaves no positions"):
        config_from_dict({"model_type": "roberta", "vocab_size": 1000, "pad_token_id": 600,
                          "max_position_embeddings": 514})
    with pytest.raises(ValueError, match="num_hidden_layers \\(4\\) must be a multiple of num_hidden_groups"):
        config_from_dict({"model_type": "albert", "num_hidden_layers": 4, "num_hidden_groups": 3,
                          "hidden_size": 32, "num_attention_heads": 4})


TOKENIZERS = {"roberta": "roberta", "xlm-roberta": "xlmr", "albert": "albert", "distilbert": "distilbert"}


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_a_folder_with_its_own_tokenizer_loads_and_reads_text_as_transformers_does(name, tmp_path):
    """A family's folder as people hold it (weights and the family's tokenizer, ``support/family_tokenizers.py``):
    ``engine.load`` reads both; our encoding of a pair is transformers' and the model's logits on it theirs."""
    from support.family_tokenizers import build

    folder = build(TOKENIZERS[name], tmp_path / name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config, mlm_class, _ = CASES[name]
    config = type(config)(**{**config.to_dict(), "vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id,
                             "max_position_embeddings": 64})
    randomized(mlm_class, config).save_pretrained(folder)
    loaded = load(folder)
    text, pair = "The café in Zürich served crème brûlée.", "Paris is the capital of France."
    ours = loaded.tokenizer.encode(text, pair, max_length=48)
    theirs = tokenizer(text, pair, truncation=True, max_length=48)
    assert ours.input_ids == theirs["input_ids"]
    assert loaded.tokenizer.mask_token == tokenizer.mask_token and loaded.tokenizer.cls_token == tokenizer.cls_token
    ids = torch.tensor([ours.input_ids])
    with torch.no_grad():
        expected = randomized(mlm_class, config)(input_ids=ids).logits
        got = loaded.model(input_ids=ids).mlm.logits
    assert (got - expected).abs().max() <= TOL * max(1.0, float(expected.abs().max()))


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("field, value", [("architectures", [3]), ("architectures", "x"), ("hidden_size", "abc"),
                                          ("pad_token_id", -4), ("id2label", "x"), ("vocab_size", 10**30),
                                          ("num_hidden_groups", 0), ("embedding_size", -1), ("dim", None)])
def test_a_damaged_config_of_any_family_is_a_value_error_never_a_crash(family, field, value):
    """Whatever a family's config.json holds, reading it gives a config or one ``ValueError`` sentence."""
    try:
        config_from_dict({"model_type": family, field: value})
    except ValueError as error:
        assert str(error) and "Traceback" not in str(error)
