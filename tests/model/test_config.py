"""BertConfig: presets, validation, and config.json compatibility with `transformers`."""
from __future__ import annotations

import dataclasses
import json

import pytest
import transformers

from engine.model.config import PRESETS, SUPPORTED_ACTIVATIONS, BertConfig, preset

FAMILY_FIELDS = ("model_type", "embedding_size", "num_hidden_groups", "position_offset", "family_options")  # families'
FIELDS = [f.name for f in dataclasses.fields(BertConfig) if f.name not in FAMILY_FIELDS]


# ---- presets --------------------------------------------------------------------------

@pytest.mark.parametrize("name, sizes", [
    ("tiny", (2, 128, 2, 512)),
    ("mini", (4, 256, 4, 1024)),
    ("small", (4, 512, 8, 2048)),
    ("medium", (8, 512, 8, 2048)),
    ("base", (12, 768, 12, 3072)),
    ("large", (24, 1024, 16, 4096)),
])
def test_preset_sizes(name, sizes):
    config = preset(name)
    got = (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size)
    assert got == sizes
    assert config.head_size * config.num_attention_heads == config.hidden_size
    # Everything else is BERT's default.
    assert config.vocab_size == 30522 and config.max_position_embeddings == 512
    assert config.hidden_act == "gelu" and config.layer_norm_eps == 1e-12


def test_preset_list_is_exactly_the_six_sizes():
    assert list(PRESETS) == ["tiny", "mini", "small", "medium", "base", "large"]


def test_base_preset_equals_transformers_default():
    ours, theirs = preset("base"), transformers.BertConfig()
    for name in FIELDS:
        if name != "architectures":
            assert getattr(ours, name) == getattr(theirs, name), name


def test_preset_overrides_are_applied_and_validated():
    config = preset("tiny", vocab_size=100, hidden_act="relu")
    assert (config.vocab_size, config.hidden_act, config.hidden_size) == (100, "relu", 128)
    with pytest.raises(ValueError, match="hidden_size"):
        preset("tiny", num_attention_heads=3)  # 128 % 3 != 0


@pytest.mark.parametrize("name", ["huge", "Tiny", "", "bert-base"])
def test_unknown_preset(name):
    with pytest.raises(ValueError, match="preset"):
        preset(name)


# ---- validation -----------------------------------------------------------------------

POSITIVE_INT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                       "intermediate_size", "max_position_embeddings", "type_vocab_size")


def test_defaults_are_valid():
    BertConfig().validate()


@pytest.mark.parametrize("field", POSITIVE_INT_FIELDS)
@pytest.mark.parametrize("value", [0, -1, -768])
def test_zero_or_negative_sizes(field, value):
    if field == "type_vocab_size" and value == 0:
        assert BertConfig(type_vocab_size=0).type_vocab_size == 0      # no segment embeddings (DistilBERT)
        return
    with pytest.raises(ValueError, match=field):
        BertConfig(**{field: value})


@pytest.mark.parametrize("field", POSITIVE_INT_FIELDS + ("pad_token_id",))
@pytest.mark.parametrize("value", [True, False])
def test_bool_is_not_an_int(field, value):
    with pytest.raises(ValueError, match=field):
        BertConfig(**{field: value})


@pytest.mark.parametrize("field", POSITIVE_INT_FIELDS)
@pytest.mark.parametrize("value", [768.0, "768", None])
def test_non_int_sizes(field, value):
    with pytest.raises(ValueError, match=field):
        BertConfig(**{field: value})


@pytest.mark.parametrize("hidden, heads", [(768, 7), (100, 3), (32, 64)])
def test_hidden_not_divisible_by_heads(hidden, heads):
    with pytest.raises(ValueError, match="hidden_size.*num_attention_heads"):
        BertConfig(hidden_size=hidden, num_attention_heads=heads)


@pytest.mark.parametrize("act", ["gelu_fast", "GELU", "mish", "", None])
def test_unknown_hidden_act(act):
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig(hidden_act=act)


@pytest.mark.parametrize("act", SUPPORTED_ACTIVATIONS)
def test_supported_activations_are_known_to_transformers(act):
    BertConfig(hidden_act=act)
    assert act in transformers.activations.ACT2FN


@pytest.mark.parametrize("field", ["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"])
@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, float("nan"), "0.1"])
def test_dropout_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        BertConfig(**{field: value})


@pytest.mark.parametrize("field", ["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"])
@pytest.mark.parametrize("value", [0.0, 0, 0.5, 0.999])
def test_dropout_in_range(field, value):
    assert getattr(BertConfig(**{field: value}), field) == value


def test_classifier_dropout_may_be_null():
    assert BertConfig(classifier_dropout=None).classifier_dropout is None


@pytest.mark.parametrize("vocab, pad", [(100, 100), (100, 101), (100, -1), (5, 30522)])
def test_pad_token_outside_vocab(vocab, pad):
    with pytest.raises(ValueError, match="pad_token_id"):
        BertConfig(vocab_size=vocab, pad_token_id=pad)


def test_pad_token_last_id_is_fine():
    assert BertConfig(vocab_size=100, pad_token_id=99).pad_token_id == 99


@pytest.mark.parametrize("field", ["layer_norm_eps", "initializer_range"])
@pytest.mark.parametrize("value", [0, -1e-12, "1e-12"])
def test_non_positive_float_fields(field, value):
    with pytest.raises(ValueError, match=field):
        BertConfig(**{field: value})


def test_empty_id2label():
    with pytest.raises(ValueError, match="id2label"):
        BertConfig(id2label={})


def test_replace_validates():
    config = BertConfig(vocab_size=100)
    assert config.replace(hidden_act="relu").hidden_act == "relu"
    assert config.hidden_act == "gelu"  # a copy
    with pytest.raises(ValueError, match="vocab_size"):
        config.replace(vocab_size=0)


# ---- config.json compatibility ----------------------------------------------------------

def unusual_config() -> BertConfig:
    """Every field away from its default, so a round trip that drops one is caught."""
    return BertConfig(
        vocab_size=997, hidden_size=48, num_hidden_layers=7, num_attention_heads=3, intermediate_size=100,
        hidden_act="gelu_new", hidden_dropout_prob=0.05, attention_probs_dropout_prob=0.2,
        max_position_embeddings=64, type_vocab_size=3, layer_norm_eps=1e-7, initializer_range=0.03,
        pad_token_id=5, classifier_dropout=0.25, id2label={0: "neg", 1: "neu", 2: "pos"},
        architectures=["BertForPreTraining"],
    )


def test_every_field_differs_from_default_in_the_test_config():
    ours, default = unusual_config(), BertConfig()
    assert [n for n in FIELDS if getattr(ours, n) == getattr(default, n)] == []


def test_our_config_json_loads_in_transformers(tmp_path):
    ours = unusual_config()
    path = ours.save(tmp_path)
    assert path == tmp_path / "config.json"
    theirs = transformers.BertConfig.from_pretrained(tmp_path)
    for name in FIELDS:
        assert getattr(theirs, name) == getattr(ours, name), name
    assert theirs.model_type == "bert"
    assert theirs.num_labels == ours.num_labels == 3
    assert theirs.id2label == {0: "neg", 1: "neu", 2: "pos"}
    assert theirs.label2id == ours.label2id == {"neg": 0, "neu": 1, "pos": 2}
    assert theirs.tie_word_embeddings is True
    assert not theirs.is_decoder


def test_our_config_json_round_trips_through_our_loader(tmp_path):
    ours = unusual_config()
    ours.save(tmp_path)
    assert BertConfig.load(tmp_path) == ours
    assert BertConfig.load(tmp_path / "config.json") == ours


def test_config_json_is_plain_json_with_string_label_keys(tmp_path):
    data = json.loads(unusual_config().save(tmp_path).read_text())
    assert data["model_type"] == "bert"
    assert data["id2label"] == {"0": "neg", "1": "neu", "2": "pos"}


def test_transformers_config_json_loads_in_ours(tmp_path):
    theirs = transformers.BertConfig(
        vocab_size=997, hidden_size=48, num_hidden_layers=7, num_attention_heads=3, intermediate_size=100,
        hidden_act="relu", hidden_dropout_prob=0.05, attention_probs_dropout_prob=0.2,
        max_position_embeddings=64, type_vocab_size=3, layer_norm_eps=1e-7, initializer_range=0.03,
        pad_token_id=5, classifier_dropout=0.25, num_labels=4, architectures=["BertForMaskedLM"],
    )
    theirs.save_pretrained(tmp_path)
    ours = BertConfig.load(tmp_path)
    for name in FIELDS:
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.num_labels == theirs.num_labels == 4
    assert ours.id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2", 3: "LABEL_3"}
    assert all(isinstance(k, int) for k in ours.id2label)


def test_transformers_default_config_json_gives_our_defaults(tmp_path):
    transformers.BertConfig().save_pretrained(tmp_path)  # transformers omits default labels
    assert BertConfig.load(tmp_path) == BertConfig()


def test_id2label_keys_become_ints(tmp_path):
    data = {"model_type": "bert", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 4,
            "id2label": {"0": "negative", "1": "neutral", "2": "positive"}}
    (tmp_path / "config.json").write_text(json.dumps(data))
    ours = BertConfig.load(tmp_path)
    assert ours.id2label == {0: "negative", 1: "neutral", 2: "positive"}
    assert ours.num_labels == 3
    assert ours.label2id == {"negative": 0, "neutral": 1, "positive": 2}
    assert BertConfig(id2label={"1": "b", "0": "a"}).id2label == {1: "b", 0: "a"}


def test_num_labels_without_id2label():
    ours = BertConfig.from_dict({"model_type": "bert", "num_labels": 5})
    assert ours.num_labels == 5
    assert ours.id2label == {i: f"LABEL_{i}" for i in range(5)}
    assert BertConfig().num_labels == 2


def test_unknown_transformers_fields_are_ignored():
    ours = BertConfig.from_dict({"model_type": "bert", "transformers_version": "4.0", "torch_dtype": "float32",
                                 "use_cache": True, "gradient_checkpointing": False, "vocab_size": 123})
    assert ours.vocab_size == 123


def test_missing_model_type_means_bert():
    # Google's original bert_config.json files carry no model_type.
    assert BertConfig.from_dict({"vocab_size": 100}).vocab_size == 100


@pytest.mark.parametrize("model_type", ["roberta", "distilbert", "gpt2", "BERT"])
def test_other_model_types_are_refused(tmp_path, model_type):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, "vocab_size": 100}))
    with pytest.raises(ValueError, match="model_type"):
        BertConfig.load(tmp_path)


def test_relative_positions_and_decoders_are_refused():
    with pytest.raises(ValueError, match="position_embedding_type"):
        BertConfig.from_dict({"model_type": "bert", "position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match="decoder"):
        BertConfig.from_dict({"model_type": "bert", "is_decoder": True})


def test_invalid_values_in_config_json_are_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 100,
                                                      "num_attention_heads": 3}))
    with pytest.raises(ValueError, match="num_attention_heads"):
        BertConfig.load(tmp_path)


@pytest.mark.parametrize("content", ["not json at all", "{\"vocab_size\": 100,", "", b"\xff\xfe\x00garbage"])
def test_non_json_file(tmp_path, content):
    path = tmp_path / "config.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError, match="JSON"):
        BertConfig.load(path)


@pytest.mark.parametrize("content", ["[1, 2, 3]", "42", "\"bert\"", "null"])
def test_json_that_is_not_an_object(tmp_path, content):
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(ValueError, match="object"):
        BertConfig.load(tmp_path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        BertConfig.load(tmp_path / "nowhere.json")
    with pytest.raises(FileNotFoundError):
        BertConfig.load(tmp_path)  # a directory without config.json


@pytest.mark.parametrize("field", ["layer_norm_eps", "initializer_range"])
@pytest.mark.parametrize("value", [0.0, -1e-12, float("nan"), float("inf"), True, "1e-12", 1.5])
def test_eps_and_init_range_must_be_small_positive_numbers(field, value):
    with pytest.raises(ValueError, match=field):
        BertConfig(**{field: value})


@pytest.mark.parametrize("value", [True, False])
def test_dropout_rejects_bools(value):
    with pytest.raises(ValueError, match="hidden_dropout_prob"):
        BertConfig(hidden_dropout_prob=value)


def test_id2label_with_non_integer_keys_names_the_field():
    with pytest.raises(ValueError, match="id2label"):
        BertConfig(id2label={"positive": "POS"})


def test_null_pad_token_id_in_config_json_means_zero(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert", "pad_token_id": null}')
    assert BertConfig.load(tmp_path).pad_token_id == 0
