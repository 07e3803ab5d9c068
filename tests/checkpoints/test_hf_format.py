"""Saving in the Hugging Face layout (strict loads in transformers), clear errors for bad
directories, and atomic replacement."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file

import engine
import engine.checkpoints.hf_format as checkpoints
from engine.disk_faults import DiskFault
from engine.model.head_specs import HEADS
from support.checkpoint_helpers import (
    ALL_HEADS, HF_CLASSES, LABELLED_CLASSES, THREE_LABELS, assert_strict, compare, edit_config, hf_load, ours_model, read_output,
    siblings,
)

pytestmark = pytest.mark.usefixtures("no_internet")


# --- export: our files in transformers --------------------------------------------------

EXPORTS = {
    # name: (heads, add_pooling_layer, architectures passed to save, transformers class)
    "pretraining": (("mlm", "nsp"), None, None, "BertForPreTraining"),
    "qa-no-pooler": (("qa",), False, None, "BertForQuestionAnswering"),
    "classifier-3-labels": (("classifier",), None, None, "BertForSequenceClassification"),
    "mlm-no-pooler": (("mlm",), False, None, "BertForMaskedLM"),
    "nsp": (("nsp",), None, None, "BertForNextSentencePrediction"),
    "encoder-only": ((), None, None, "BertModel"),
    "token-classifier-3-labels": (("token_classifier",), None, None, "BertForTokenClassification"),
    "multiple-choice": (("multiple_choice",), None, None, "BertForMultipleChoice"),
    "all-heads-as-qa": (ALL_HEADS, None, ["BertForQuestionAnswering"], "BertForQuestionAnswering"),
    "all-heads-as-mlm": (ALL_HEADS, None, ["BertForMaskedLM"], "BertForMaskedLM"),
}


@pytest.mark.parametrize("name", EXPORTS)
def test_export_loads_strictly_in_transformers_with_identical_outputs(name, make_config, inputs, tmp_path):
    heads, pooling, architectures, hf_class = EXPORTS[name]
    config = make_config(id2label=THREE_LABELS) if hf_class in LABELLED_CLASSES else make_config()
    model = ours_model(config, heads, pooling)
    out = engine.save(model, None, tmp_path / "export", architectures)
    assert out == tmp_path / "export"
    assert json.loads((out / "config.json").read_text())["architectures"] == [hf_class]

    hf, info = hf_load(hf_class, out)
    assert_strict(info)
    compare(model, hf, hf_class, inputs)
    if hf_class in LABELLED_CLASSES:
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
    assert loaded.heads == ALL_HEADS and loaded.missing_heads == tuple(h for h in HEADS if h not in ALL_HEADS)
    assert loaded.missing_heads[:2] == ("token_classifier", "multiple_choice")      # the built-ins it lacks
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
        engine.save(ours_model(make_config(), ALL_HEADS), None, tmp_path / "out", ["BertLMHeadModel"])
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
    with pytest.raises(ValueError, match="corrupt or unreadable") as caught:
        engine.load(saved)
    assert str(caught.value).count(str(saved)) == 1, "the message names the folder once"


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
    edit_config(saved, model_type="roberta")       # read as a RoBERTa's: tests/model/test_families.py
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
        loaded.require_head("classifier")
    bare = engine.load(engine.save(ours_model(make_config(), ()), None, tmp_path / "bare"))
    with pytest.raises(ValueError, match="no masked-LM head .* no heads"):
        bare.require_head("mlm")


def test_require_tokenizer_returns_it_or_says_what_cannot_be_done(make_config, tiny_tokenizer, tmp_path):
    with_one = engine.load(engine.save(ours_model(make_config(), ("mlm",)), tiny_tokenizer, tmp_path / "m"))
    assert with_one.require_tokenizer() is with_one.tokenizer
    assert with_one.require_tokenizer().encode("hello world").tokens[0] == "[CLS]"
    without = engine.load(engine.save(ours_model(make_config(), ("mlm",)), None, tmp_path / "bare"))
    assert without.tokenizer is None
    with pytest.raises(ValueError, match=r"^this model \(.*bare\) has no tokenizer files \(vocab\.txt or "
                                         r"tokenizer\.json\), so it cannot read text$"):
        without.require_tokenizer()
    with pytest.raises(ValueError, match=r"has no tokenizer files .*, so it cannot answer questions$"):
        without.require_tokenizer("so it cannot answer questions")


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


def test_a_loaded_model_saved_again_round_trips(make_config, tiny_tokenizer, inputs, tmp_path):
    model = ours_model(make_config(), ALL_HEADS)
    first = engine.load(engine.save(model, tiny_tokenizer, tmp_path / "a"))
    second = engine.load(engine.save(first.model, first.tokenizer, tmp_path / "b"))
    assert second.heads == ALL_HEADS and second.tokenizer.get_vocab() == tiny_tokenizer.get_vocab()
    with torch.no_grad():
        a, b = model(**inputs), second.model(**inputs)
    for name in ("mlm.logits", "nsp.logits", "qa.start_logits", "qa.end_logits", "classifier.logits"):
        assert torch.equal(read_output(a, name), read_output(b, name)), name


def test_saved_directory_is_world_readable(tmp_path):
    """A saved model is an ordinary folder others (a server, a Space) can read, not a private temp dir."""
    import stat

    import engine

    model = engine.BertWithHeads(engine.preset("tiny", vocab_size=100), heads=("mlm", "nsp"))
    target = engine.save(model, None, tmp_path / "exported")
    assert stat.S_IMODE(target.stat().st_mode) & 0o055 == 0o055
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o044 == 0o044 for p in target.iterdir())


def test_leftovers_of_a_killed_writer_are_recovered_and_a_live_one_is_left_alone(make_config, tmp_path):
    """What SIGKILL mid-save leaves (see tests/training/loop/test_faults.py for the real kills): staging and
    half-deleted folders of dead processes go; a swapped-out version comes back if nothing replaced it."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    engine.save(ours_model(make_config(), ("mlm",)), None, tmp_path / "a")
    engine.save(ours_model(make_config(), ("mlm",)), None, tmp_path / "b")
    (tmp_path / "a").rename(tmp_path / f".a.old-{dead}")                 # killed between the swap's renames
    (tmp_path / f".b.old-{dead}").mkdir()                                # killed after it: b is the new one
    for name in (f".c.tmp-{dead}-x1y2", f".d.del-{dead}", f".e.tmp-{os.getpid()}-live", ".f.partial-1"):
        (tmp_path / name).mkdir()
    touched = checkpoints.recover_interrupted_writes(tmp_path)
    assert len(touched) == 4
    assert siblings(tmp_path / "a") == [f".e.tmp-{os.getpid()}-live", ".f.partial-1", "a", "b"]
    assert engine.load(tmp_path / "a").heads == ("mlm",) and engine.load(tmp_path / "b").heads == ("mlm",)


def test_work_names_of_another_host_are_never_touched(tmp_path):
    """On a runs folder shared by several machines (a cluster), a staging folder written by another host is
    that host's business: its process ID means nothing here. This host's dead writers are cleaned up."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    other = "0000abcd" if checkpoints.THIS_HOST != "0000abcd" else "0000abce"
    for name in (f".s.tmp-{dead}-h{other}-x1", f".t.del-{dead}-h{other}", f".u.tmp-{dead}-h{checkpoints.THIS_HOST}-x2"):
        (tmp_path / name).mkdir()
    assert [p.name for p in checkpoints.recover_interrupted_writes(tmp_path)] == [f".u.tmp-{dead}-h{checkpoints.THIS_HOST}-x2"]
    assert siblings(tmp_path / "s") == [f".s.tmp-{dead}-h{other}-x1", f".t.del-{dead}-h{other}"]
    assert checkpoints.work_tag() == f"{os.getpid()}-h{checkpoints.THIS_HOST}"


@pytest.mark.parametrize("errno_, fault, remedy", [
    (28, "The disk holding {} is full (no space left on device)", "free space"),
    (30, "The folder {} is on a read-only file system", "make it writable or choose another folder")])
def test_write_errors_say_what_happened(monkeypatch, make_config, tmp_path, errno_, fault, remedy):
    def refuse(*args, **kwargs):
        raise OSError(errno_, os.strerror(errno_))

    monkeypatch.setattr(checkpoints, "save_file", refuse)
    with pytest.raises(DiskFault) as caught:
        engine.save(ours_model(make_config(), ()), None, tmp_path / "new")
    assert str(caught.value) == f"{fault.format(tmp_path)} while writing the model folder new: {remedy}."
    assert caught.value.errno == errno_ and isinstance(caught.value, OSError)
    assert list(tmp_path.iterdir()) == []
