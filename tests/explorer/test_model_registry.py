"""The model registry behind the picker: which models are listed, how typed sources resolve,
what is refused (paths outside the allowed folders, traversal, URLs, offline hub), and caching."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from engine.checkpoints.hf_format import save
from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from explorer.models.description import describe
from explorer.models.keys import ModelKey
from explorer.models.choices import checkpoint_key
from explorer.models.registry import ModelRegistry
from explorer.models.settings import inference_device
from support.probing_helpers import RUN, STEPS, tiny_model, write_run
from tests.conftest import tiny_config


@pytest.fixture
def runs(tmp_path: Path, tiny_tokenizer) -> Path:
    root = tmp_path / "runs"
    write_run(root, tiny_tokenizer)
    return root


def test_choices_list_default_then_checkpoints_newest_first(tmp_path: Path, runs: Path, tiny_tokenizer) -> None:
    default = tmp_path / "default-model"
    save(tiny_model(0), tiny_tokenizer, default)
    registry = ModelRegistry(runs_root=runs, default_dir=default)
    choices = registry.choices()
    assert [c.key for c in choices] == (["default"] + [f"checkpoint:{RUN}/step-{s:06d}" for s in sorted(STEPS, reverse=True)]
                                        + ["untrained"])
    assert re.match(rf"{RUN} · step {max(STEPS)} · (held-out|batch) loss \d", choices[1].label), choices[1].label
    assert [c.step for c in registry.run_checkpoints(choices[2].key)] == sorted(STEPS)


def test_the_untrained_twin_is_the_default_models_shape_with_fresh_weights(tmp_path: Path, tiny_tokenizer) -> None:
    default = tmp_path / "default-model"
    save(tiny_model(0), tiny_tokenizer, default)
    registry = ModelRegistry(runs_root=tmp_path / "runs", default_dir=default)
    trained, twin = registry.get("default"), registry.get("untrained")
    assert twin.config == trained.config and twin.heads == trained.heads and registry.get("untrained") is twin
    word = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(twin.model.state_dict()[word], trained.model.state_dict()[word])
    with pytest.raises(ValueError, match="held in memory only"):
        registry.folder("untrained")                     # nothing on disk to fine-tune from
    assert "untrained" not in [c.key for c in ModelRegistry(runs_root=tmp_path, default_dir=None).choices()]


def test_no_default_and_no_runs_gives_empty_list_and_clear_message(tmp_path: Path) -> None:
    registry = ModelRegistry(runs_root=tmp_path / "none", default_dir=tmp_path / "missing")
    assert registry.choices() == [] and registry.run_checkpoints() == []
    with pytest.raises(FileNotFoundError, match="bundled default model is missing"):
        registry.get("default")


def test_checkpoint_loads_with_its_weights(runs: Path) -> None:
    registry = ModelRegistry(runs_root=runs, default_dir=None)
    key = registry.choices()[-1].key                     # the oldest checkpoint
    loaded = registry.get(key)
    expected = tiny_model(100)
    assert torch.equal(loaded.model.state_dict()["bert.embeddings.word_embeddings.weight"],
                       expected.state_dict()["bert.embeddings.word_embeddings.weight"])
    assert registry.get(key) is loaded                    # cached
    assert set(loaded.heads) == {"mlm", "nsp", "qa"}


def test_cache_is_bounded(runs: Path) -> None:
    registry = ModelRegistry(runs_root=runs, default_dir=None, cache_size=1)
    first, second = (c.key for c in registry.choices()[:2])
    a = registry.get(first)
    registry.get(second)
    assert registry.get(first) is not a                  # evicted, loaded again


@pytest.mark.parametrize("key, message", [
    ("checkpoint:../../etc/step-000001", "not a checkpoint name"),
    (f"checkpoint:{RUN}/..", "not a checkpoint name"),
    (f"checkpoint:{RUN}/step-999999", "does not exist"),
    ("https://huggingface.co/bert-base-uncased", "not a URL"),
    ("hub:a/b/c", "not a hub model id"),
    ("nonsense key with spaces", "neither a model key, a model folder nor a hub id"),
    ("", "Choose a model"),
])
def test_bad_keys_are_refused_with_a_message(runs: Path, key: str, message: str) -> None:
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        ModelRegistry(runs_root=runs, default_dir=None).get(key)


def test_local_models_only_inside_allowed_folders(tmp_path: Path, tiny_tokenizer) -> None:
    allowed, outside = tmp_path / "models", tmp_path / "elsewhere"
    save(tiny_model(3), tiny_tokenizer, allowed / "mine")
    save(tiny_model(3), tiny_tokenizer, outside / "theirs")
    registry = ModelRegistry(allowed_dirs=(allowed,), default_dir=None)
    key = registry.resolve(str(allowed / "mine"))
    assert key == ModelKey.local(str(allowed / "mine")) and str(key) == f"local:{allowed / 'mine'}"
    assert registry.get(key).config.hidden_size == 32
    assert registry.canonical(key).text == "local:models/mine" in [c.key for c in registry.choices()]  # no path
    assert registry.get("local:models/mine") is registry.get(key)                  # one model, two names
    with pytest.raises(ValueError, match="inside the allowed model folders"):
        registry.get(str(outside / "theirs"))
    with pytest.raises(ValueError, match="inside the allowed model folders"):
        registry.get(f"local:{allowed}/../elsewhere/theirs")
    with pytest.raises(FileNotFoundError, match="no model folder"):
        registry.get(f"local:{allowed / 'absent'}")


def test_hub_ids_resolve_and_fail_clearly_offline(monkeypatch, no_internet) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    registry = ModelRegistry(default_dir=None)
    assert registry.resolve("google/bert_uncased_L-2_H-128_A-2") == ModelKey.hub("google/bert_uncased_L-2_H-128_A-2")
    with pytest.raises(ConnectionError, match="offline mode"):
        registry.get("google/bert_uncased_L-2_H-128_A-2")


def test_an_owner_name_folder_outside_the_allowed_ones_reads_as_a_hub_id(tmp_path, monkeypatch, tiny_tokenizer) -> None:
    """No oracle: whether ``owner/name`` exists as a folder under the working directory (outside the allowed
    folders) does not change the answer; inside them it is the local model."""
    monkeypatch.chdir(tmp_path)
    save(tiny_model(3), tiny_tokenizer, tmp_path / "models" / "mine")
    (tmp_path / "secret" / "folder").mkdir(parents=True)
    registry = ModelRegistry(allowed_dirs=(tmp_path / "models",), default_dir=None)
    assert registry.resolve("secret/folder") == ModelKey.hub("secret/folder")
    assert registry.resolve("secret/absent") == ModelKey.hub("secret/absent")
    assert registry.resolve("models/mine") == ModelKey.local("models/mine")


@pytest.mark.parametrize("denied", ["iterdir", "open"])
def test_an_unreadable_model_folder_is_refused_naming_only_its_key(tmp_path, monkeypatch, tiny_tokenizer,
                                                                   denied) -> None:
    """A folder or file the server may not read (root ignores chmod, so the refusal is simulated where the
    file system gives it: listing the folder, opening a file) is a clear message with no server path."""
    save(tiny_model(3), tiny_tokenizer, tmp_path / "models" / "mine")
    registry = ModelRegistry(allowed_dirs=(tmp_path / "models",), default_dir=None)
    real = getattr(Path, denied)

    def refuse(self, *args, **kwargs):
        if "mine" in str(self):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, denied, refuse)
    if denied == "open":                      # files are opened through engine.regular_files (os.open)
        real_open = os.open

        def refuse_open(path, *args, **kwargs):
            if "mine" in str(path):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", refuse_open)
    with pytest.raises(ValueError, match=r"local:models/mine cannot be read \(permission denied") as info:
        registry.get(f"local:{tmp_path}/models/mine")
    assert str(tmp_path) not in str(info.value)


def test_live_needs_a_run() -> None:
    with pytest.raises(ValueError, match="no training run"):
        ModelRegistry(default_dir=None).get("live")


def test_describe_names_heads_and_missing_ones(tiny_tokenizer) -> None:
    bare = tiny_model(1, heads=())
    text = describe(LoadedModel(bare, tiny_tokenizer, bare.config, "bare encoder"))
    assert "bare encoder" in text and "2 layers × 4 heads" in text
    assert "none (encoder only)" in text and "No masked LM (Fill-mask), no next sentence (NSP), no question" in text


def test_checkpoint_key_round_trip(runs: Path) -> None:
    path = runs / RUN / "checkpoints" / "step-000004"
    assert checkpoint_key(path) == f"checkpoint:{RUN}/step-000004"


# --- the device models run on ---------------------------------------------------------------

@pytest.mark.parametrize(("env", "cuda", "expected"), [
    ({}, False, "cpu"), ({}, True, "cuda"), ({"EXPLORER_DEVICE": "auto"}, True, "cuda"),
    ({"EXPLORER_DEVICE": "cpu"}, True, "cpu"), ({"EXPLORER_DEVICE": " CUDA:1 "}, False, "cuda:1"),
])
def test_inference_device_follows_the_environment_and_the_hardware(env, cuda, expected, monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert inference_device(env) == expected


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "tpu", "cpu;rm -rf /"])
def test_inference_device_refuses_nonsense(bad) -> None:
    with pytest.raises(ValueError, match="EXPLORER_DEVICE"):
        inference_device({"EXPLORER_DEVICE": bad})


def test_models_are_loaded_onto_the_registry_device(tmp_path, monkeypatch) -> None:
    import explorer.models.registry as registry_module
    seen = []
    from types import SimpleNamespace

    from engine.model.config import BertConfig
    model = SimpleNamespace(config=BertConfig())                  # a stand-in LoadedModel of a BERT
    monkeypatch.setattr(registry_module, "load_directory",
                        lambda directory, device="cpu", source=None, **_: seen.append((Path(directory), device)) or model)
    (tmp_path / "config.json").write_text("{}")
    registry = ModelRegistry(runs_root=tmp_path / "runs", default_dir=tmp_path, device="cuda:0")
    assert registry.get("default") is model
    assert seen == [(tmp_path, "cuda:0")]


@pytest.mark.parametrize(("raw", "megabytes"), [("", 1500), ("250", 250), ("nonsense", 1500), ("-5", 0)])
def test_the_hub_cap_comes_from_the_environment(raw: str, megabytes: float) -> None:
    from explorer.models.settings import max_hub_bytes

    assert max_hub_bytes({"EXPLORER_MAX_HUB_MB": raw}) == int(megabytes * 1_000_000)
    assert max_hub_bytes({}) == 1_500_000_000


def test_the_registry_passes_its_cap_to_the_hub_and_names_the_setting(monkeypatch, tmp_path: Path) -> None:
    from engine.checkpoints import hub

    asked: list[int] = []

    def download(repo_id: str, revision=None, timeout: float = 10.0, max_bytes: int = hub.DEFAULT_MAX_BYTES,
                 check_config=None):
        asked.append(max_bytes)
        hub.check_download_size(repo_id, [("model.safetensors", 400_000_000)], max_bytes)
        raise AssertionError("a capped download must not get here")

    monkeypatch.setattr(hub, "download", download)
    monkeypatch.setattr(hub, "hub_offline", lambda: False)
    monkeypatch.setenv("EXPLORER_MAX_HUB_MB", "100")
    registry = ModelRegistry(runs_root=tmp_path, default_dir=None)
    with pytest.raises(hub.DownloadTooLargeError, match="400 MB of weights; at most 100 MB .*EXPLORER_MAX_HUB_MB"):
        registry.get("hub:someone/big-bert")
    assert asked == [100_000_000]
    assert ModelRegistry(runs_root=tmp_path, default_dir=None, max_download_bytes=7).max_download_bytes == 7


def test_runs_are_listed_and_chosen_by_name(runs: Path, tiny_tokenizer) -> None:
    """The over-training views walk one run: the picked checkpoint's, the newest, or one named; an older run
    with more checkpoints stays reachable after a newer run with one."""
    write_run(runs, tiny_tokenizer, steps=(50,), run="run-b", later_by_s=60)   # newer, one checkpoint
    registry = ModelRegistry(runs_root=runs, default_dir=None)
    assert [r.label for r in registry.runs()] == ["run-b · 1 checkpoint, step 50",
                                                  f"{RUN} · 3 checkpoints, steps 2–6"]
    assert [c.step for c in registry.run_checkpoints()] == [50]                    # the newest run
    assert [c.step for c in registry.run_checkpoints(run=RUN)] == sorted(STEPS)     # the run asked for
    assert [c.step for c in registry.run_checkpoints(f"checkpoint:{RUN}/step-000002")] == sorted(STEPS)
    assert [c.step for c in registry.run_checkpoints(f"checkpoint:{RUN}/step-000002", run="run-b")] == [50]
    with pytest.raises(ValueError, match=f"'gone' has no checkpoints. Runs with checkpoints now: run-b .*, {RUN} "):
        registry.run_checkpoints(run="gone")
    with pytest.raises(ValueError, match="'nope' has no checkpoints"):
        registry.run_checkpoints("checkpoint:nope/step-000001")


def test_the_registry_takes_a_key_value_or_its_text_and_names_a_checkpoint_s_run(runs: Path, tiny_tokenizer) -> None:
    """A ``ModelKey`` and its text name the same model (one cache entry); a value comes back from ``resolve`` as
    it is; a checkpoint's choice names its run, so the over-training views never take its key apart."""
    registry = ModelRegistry(runs_root=runs, default_dir=None)
    key = ModelKey.checkpoint(RUN, "step-000004")
    assert registry.resolve(key) is key and registry.resolve(key.text) == key
    assert registry.get(key) is registry.get(key.text)
    assert registry.folder(key) == registry.folder(key.text) == runs / RUN / "checkpoints" / "step-000004"
    assert {c.run for c in registry.run_checkpoints(key)} == {RUN} == {c.run for c in registry.choices()}
    registry.pin("tiny", LoadedModel(tiny_model(0), tiny_tokenizer, tiny_model(0).config, "in memory"))
    assert registry.resolve("tiny") == ModelKey.parse("tiny") and registry.get("tiny").source == "in memory"


def test_an_unknown_key_lists_the_keys_available_now(runs: Path, tiny_tokenizer) -> None:
    from explorer.services import Services

    registry = ModelRegistry(runs_root=runs, default_dir=None)
    services = Services(tokenizer=tiny_tokenizer, models=registry)
    keys = ", ".join(f"checkpoint:{RUN}/step-{s:06d}" for s in sorted(STEPS, reverse=True))
    for key, reason in [("live", "There is no training run right now"), ("typo", "'typo' is neither a model key"),
                        (f"checkpoint:{RUN}/step-000099", "does not exist")]:
        with pytest.raises(ValueError) as caught:
            services.model(key)
        assert reason in str(caught.value) and str(caught.value).endswith(f"Models available now: {keys}.")
    for i in range(20):
        write_run(runs, tiny_tokenizer, steps=(1,), run=f"run-{i:02d}")
    with pytest.raises(ValueError, match=r"Models available now: (checkpoint:\S+, ){11}checkpoint:\S+ and 11 more\."):
        services.model("typo")


def test_a_key_names_the_folder_a_training_job_starts_from(tmp_path: Path, runs: Path, tiny_tokenizer, monkeypatch,
                                                           no_internet) -> None:
    """``folder(key)`` is what the Fine-tune tab passes as ``init_from``: the folder the picker loads that key from."""
    default, allowed = tmp_path / "default-model", tmp_path / "models"
    save(tiny_model(0), tiny_tokenizer, default)
    save(tiny_model(3), tiny_tokenizer, allowed / "mine")
    registry = ModelRegistry(runs_root=runs, allowed_dirs=(allowed,), default_dir=default)
    assert registry.folder("default") == default
    key = f"checkpoint:{RUN}/step-000004"
    assert registry.folder(key) == runs / RUN / "checkpoints" / "step-000004"
    assert torch.equal(registry.get(key).model.state_dict()["bert.pooler.dense.weight"],
                       tiny_model(101).state_dict()["bert.pooler.dense.weight"])       # the second checkpoint
    assert registry.folder(str(allowed / "mine")) == (allowed / "mine").resolve()
    with pytest.raises(ValueError, match="inside the allowed model folders"):
        registry.folder(str(tmp_path / "default-model"))
    with pytest.raises(ValueError, match="pick one of its run's checkpoints"):
        registry.folder("live")
    registry.pin("memory", LoadedModel(tiny_model(0), tiny_tokenizer, tiny_model(0).config, "in memory"))
    with pytest.raises(ValueError, match="held in memory only"):
        registry.folder("memory")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConnectionError, match="offline mode"):
        registry.folder("hub:google/bert_uncased_L-2_H-128_A-2")
    with pytest.raises(FileNotFoundError, match="bundled default model is missing"):
        ModelRegistry(default_dir=tmp_path / "absent").folder("default")


def test_describe_says_where_to_try_fine_tuned_heads_and_names_their_labels(tiny_tokenizer) -> None:
    tags = {i: tag for i, tag in enumerate("ADJ ADP ADV DET NOUN PRON PUNCT VERB".split())}
    torch.manual_seed(0)
    tagger = BertWithHeads(tiny_config(id2label=tags), heads=("mlm", "token_classifier"))
    text = describe(LoadedModel(tagger, tiny_tokenizer, tagger.config, "pos tagger"))
    assert "token classification (Heads › Tag words; 8 labels: ADJ, ADP, ADV, DET, NOUN, PRON, …)" in text
    assert "Fine-tune" not in text
    chooser = tiny_model(1, heads=("multiple_choice",))
    assert "multiple choice (Heads › Choose)" in describe(LoadedModel(chooser, tiny_tokenizer, chooser.config, "mc"))
    plain = tiny_model(1, heads=("mlm", "nsp"))
    assert "add one in the **Fine-tune** tab" in describe(LoadedModel(plain, tiny_tokenizer, plain.config, "base"))


def _saved_roberta(tmp_path):
    import transformers

    folder = tmp_path / "models" / "roberta"
    config = transformers.RobertaConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=32, max_position_embeddings=20)
    transformers.RobertaForMaskedLM(config).save_pretrained(folder)
    return folder


def test_another_family_loads_in_the_picker_named_with_its_size(tmp_path) -> None:
    """A RoBERTa in an allowed folder loads through the picker; its entry names the family and its size, and the
    description its usable positions (max_position_embeddings less RoBERTa's offset)."""
    folder = _saved_roberta(tmp_path)
    registry = ModelRegistry(allowed_dirs=(tmp_path / "models",), default_dir=None)
    loaded = registry.get(f"local:{folder}")
    assert loaded.config.model_type == "roberta"
    label = next(c.label for c in registry.choices() if c.kind == "local")
    params = sum(p.numel() for p in loaded.model.parameters())
    assert label.endswith(f"(RoBERTa, {params:,} parameters)")             # under a million: every digit
    assert "RoBERTa" in describe(loaded) and "18 positions" in describe(loaded)


def test_a_family_the_tabs_do_not_read_is_refused_with_a_sentence(tmp_path, monkeypatch) -> None:
    """A family marked as not read by the tabs yet (``Family.in_the_tabs``) is refused at the picker, naming the
    family and those the tabs read, instead of failing later inside a tab."""
    import dataclasses

    from engine.model.families import registry as families

    folder = _saved_roberta(tmp_path)
    monkeypatch.setitem(families.FAMILIES, "roberta", dataclasses.replace(families.FAMILIES["roberta"],
                                                                          in_the_tabs=False))
    registry = ModelRegistry(allowed_dirs=(tmp_path / "models",), default_dir=None)
    with pytest.raises(ValueError, match=r"is a RoBERTa model: it loads in the engine .* tabs do not read this "
                                         r"family yet; they read BERT, XLM-R, DistilBERT"):
        registry.get(f"local:{folder}")
