"""engine.checkpoints.hub without any network: id validation, fast and clear failures offline / unreachable /
stalled, and loading from a Hugging Face cache laid out exactly as huggingface_hub writes it.

Every test runs under the ``no_internet`` guard (conftest.py): resolving or connecting to anything
but loopback fails the test. The "hub" here is a closed or fake port on 127.0.0.1.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import json
import socket
import threading
import time
from pathlib import Path

import huggingface_hub
import pytest
import torch
import transformers
from huggingface_hub import constants

import engine
import engine.checkpoints.hf_format as checkpoints
from engine.checkpoints import hub
from engine.checkpoints.model_fit import ModelTooLargeError
from engine.model.heads import BertWithHeads
from support.reference import batch, hf_copy, max_diff, randomize_

pytestmark = pytest.mark.usefixtures("no_internet")

COMMIT = "0123456789abcdef0123456789abcdef01234567"


# --- is_hub_id ----------------------------------------------------------------------

@pytest.mark.parametrize("text", ["google-bert/bert-base-uncased", "a/b.c-d_e",
                                  "sentence-transformers/all-MiniLM-L6-v2", "O1/n2"])
def test_is_hub_id_accepts(text):
    assert hub.is_hub_id(text)


@pytest.mark.parametrize("text", ["../etc/passwd", "a/../b", "https://huggingface.co/x/y", "a/b/c", "", "/abs",
                                  "a b", "a//b", "..", "a/..", "./a", "~/a", "a/b\n", "a/b.", "-a/b", "a/-b",
                                  "owner/", "/name", "a\\b", "a/b?revision=main", "a:b",
                                  "bert-base-uncased", "x"])  # legacy single names: owner/name only
def test_is_hub_id_rejects(text):
    assert not hub.is_hub_id(text)


def test_download_refuses_a_non_id_before_any_hub_call(monkeypatch):
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _no_hub_call)
    with pytest.raises(ValueError, match="not a hub model id"):
        hub.download("../etc/passwd")


# --- fixtures -------------------------------------------------------------------------

def _no_hub_call(*args, **kwargs):
    raise AssertionError(f"a hub call was made: {args} {kwargs}")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def hf_cache(monkeypatch, tmp_path) -> Path:
    """An empty HF cache, and the hub endpoint on a closed loopback port (whatever a test does).

    huggingface_hub reads HF_HUB_CACHE / HF_ENDPOINT into ``constants`` at import time, so both the
    environment and the constants are patched; snapshot_download and HfApi read the constants per call.
    """
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    return cache


@pytest.fixture
def offline(monkeypatch, hf_cache) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hf_cache


@pytest.fixture
def online(monkeypatch, hf_cache) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    return hf_cache


def test_the_cache_fixture_really_redirects_huggingface_hub(offline):
    # Check the assumption the other tests rest on: snapshot_download looks in our tmp cache.
    storage = offline / "models--owner--probe"
    (storage / "refs").mkdir(parents=True)
    (storage / "refs" / "main").write_text(COMMIT)
    (storage / "snapshots" / COMMIT).mkdir(parents=True)
    found = huggingface_hub.snapshot_download("owner/probe", local_files_only=True)
    assert Path(found) == storage / "snapshots" / COMMIT


# --- no hub: fast, clear failures -----------------------------------------------------

def test_offline_and_not_cached_fails_fast_with_a_clear_message(offline):
    start = time.monotonic()
    with pytest.raises(hub.HubUnavailableError, match="HF_HUB_OFFLINE") as info:
        engine.load("someone/some-bert")
    assert time.monotonic() - start < 5
    assert isinstance(info.value, ConnectionError)
    assert "someone/some-bert" in str(info.value)
    assert not (offline / "models--someone--some-bert" / "snapshots").exists()


def test_legacy_single_name_is_refused_with_the_form_to_use(offline):
    with pytest.raises(FileNotFoundError, match="owner/name"):
        engine.load("bert-base-uncased")


def test_unreachable_hub_fails_fast(online):
    start = time.monotonic()
    with pytest.raises(hub.HubUnavailableError, match="could not reach the Hugging Face hub") as info:
        engine.load("someone/some-bert")
    assert time.monotonic() - start < 10
    assert isinstance(info.value, ConnectionError)


class FakeHub:
    """A loopback TCP server that misbehaves in one way: it hangs, drops the connection, or answers."""

    def __init__(self, mode: str, response: bytes = b"") -> None:
        self.mode, self.response, self.connections = mode, response, 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            if self.mode == "hang":
                self.held.append(conn)  # never answers
                continue
            if self.mode == "answer":
                conn.recv(65536)
                conn.sendall(self.response)
            conn.close()

    def close(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


def _http(status: str, headers: str = "") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: 2\r\nConnection: close\r\n{headers}\r\n{{}}".encode()


@pytest.mark.timeout(30)  # before the bounded look-up, a stalled hub hung forever
@pytest.mark.parametrize("mode, response", [
    ("hang", b""),                                    # a stalled connection
    ("drop", b""),                                    # connection reset without an answer
    ("answer", b"garbage\r\n\r\n"),                   # not HTTP
    ("answer", _http("503 Service Unavailable")),     # hub down
])
def test_misbehaving_hub_gives_hub_unavailable_quickly(mode, response, online, monkeypatch):
    fake = FakeHub(mode, response)
    monkeypatch.setattr(constants, "ENDPOINT", fake.endpoint)
    try:
        start = time.monotonic()
        with pytest.raises(hub.HubUnavailableError, match="could not reach"):
            hub.download("someone/some-bert", timeout=1.0)
        assert time.monotonic() - start < 8
        assert fake.connections >= 1, "the fake hub was never asked: the test did not test the network path"
    finally:
        fake.close()


def test_missing_repo_is_file_not_found(online, monkeypatch):
    fake = FakeHub("answer", _http("404 Not Found", "X-Error-Code: RepoNotFound\r\n"))
    monkeypatch.setattr(constants, "ENDPOINT", fake.endpoint)
    try:
        with pytest.raises(FileNotFoundError, match="not found or is not public"):
            engine.load("someone/no-such-bert")
    finally:
        fake.close()


@pytest.mark.parametrize("text", ["../x", "a/b/c", "./a/b", "/no/such/dir", "~/no-such-dir/x", "a b",
                                  "https://huggingface.co/x/y", "a//b"])
def test_paths_and_urls_never_reach_the_hub(text, monkeypatch, online):
    monkeypatch.setattr(hub, "download", _no_hub_call)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _no_hub_call)
    monkeypatch.setattr(huggingface_hub.HfApi, "repo_info", _no_hub_call)
    with pytest.raises((FileNotFoundError, ValueError)):
        engine.load(text)


# --- a cached snapshot, as huggingface_hub lays it out ------------------------------------

def _cache_snapshot(cache: Path, repo_id: str, source: Path, commit: str = COMMIT) -> Path:
    """models--owner--name/{blobs/<sha256>, refs/main, snapshots/<commit>/<file> -> ../../blobs/<sha256>}."""
    storage = cache / ("models--" + repo_id.replace("/", "--"))
    blobs, snapshot = storage / "blobs", storage / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    (storage / "refs").mkdir(exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    for path in sorted(source.iterdir()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copyfile(path, blobs / digest)
        os.symlink(os.path.join("..", "..", "blobs", digest), snapshot / path.name)
    return snapshot


@pytest.fixture
def tiny_saved(make_config, tiny_tokenizer, tmp_path):
    model = randomize_(BertWithHeads(make_config(), heads=("mlm", "nsp")), 11).eval()
    return model, engine.save(model, tiny_tokenizer, tmp_path / "tiny")


def _check_same(model, loaded, config) -> None:
    inputs = batch(config)
    with torch.no_grad():
        a, b = model(**inputs), loaded.model(**inputs)
    assert max_diff(a.mlm.logits, b.mlm.logits) == 0
    assert max_diff(a.nsp.logits, b.nsp.logits) == 0


def test_cached_snapshot_loads_offline(offline, tiny_saved, make_config):
    model, saved = tiny_saved
    snapshot = _cache_snapshot(offline, "owner/name", saved)
    assert (snapshot / "model.safetensors").is_symlink()
    loaded = engine.load("owner/name")
    assert loaded.source == "hub:owner/name"
    assert loaded.path == snapshot
    assert loaded.heads == ("mlm", "nsp") and loaded.tokenizer is not None
    _check_same(model, loaded, make_config())


def test_cached_snapshot_is_used_when_the_hub_is_unreachable(online, tiny_saved, make_config):
    model, saved = tiny_saved
    _cache_snapshot(online, "owner/name", saved)
    start = time.monotonic()
    loaded = engine.load("owner/name")
    assert time.monotonic() - start < 10
    _check_same(model, loaded, make_config())


@pytest.mark.timeout(30)
def test_cached_snapshot_is_used_when_the_hub_stalls(online, tiny_saved, make_config, monkeypatch):
    model, saved = tiny_saved
    snapshot = _cache_snapshot(online, "owner/name", saved)
    fake = FakeHub("hang")
    monkeypatch.setattr(constants, "ENDPOINT", fake.endpoint)
    try:
        start = time.monotonic()
        assert hub.download("owner/name", timeout=1.0) == snapshot
        assert time.monotonic() - start < 8
    finally:
        fake.close()


def test_cached_sharded_snapshot_with_symlinked_shards_loads(offline, make_config, tmp_path):
    # The hub cache stores every file as a symlink into blobs/: shards must not be refused as "outside".
    config = make_config()
    model = randomize_(BertWithHeads(config, heads=("qa",), add_pooling_layer=False), 12).eval()
    hf = hf_copy(model, transformers.BertForQuestionAnswering)
    hf.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").exists()
    _cache_snapshot(offline, "owner/sharded", tmp_path / "sharded")
    loaded = engine.load("owner/sharded")
    assert loaded.heads == ("qa",)
    inputs = batch(config)
    with torch.no_grad():
        assert max_diff(loaded.model(**inputs).qa.start_logits, model(**inputs).qa.start_logits) == 0


def test_cached_snapshot_with_only_pytorch_model_bin_loads_offline(offline, tiny_saved, make_config, tmp_path):
    model, saved = tiny_saved
    legacy = tmp_path / "legacy"
    shutil.copytree(saved, legacy)
    state = checkpoints.read_weights(legacy)
    (legacy / "model.safetensors").unlink()
    torch.save(state, legacy / "pytorch_model.bin")
    _cache_snapshot(offline, "owner/legacy", legacy)
    loaded = engine.load("owner/legacy")
    assert loaded.heads == ("mlm", "nsp")
    _check_same(model, loaded, make_config())


def test_cached_snapshot_of_another_repo_is_not_used(offline, tiny_saved):
    _, saved = tiny_saved
    _cache_snapshot(offline, "owner/name", saved)
    with pytest.raises(hub.HubUnavailableError):
        engine.load("owner/other")


def test_transformers_offline_also_counts_as_offline(monkeypatch):
    from engine.checkpoints import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert hub.hub_offline()
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    assert not hub.hub_offline()


# --- download size cap ---------------------------------------------------------------------

def _json_http(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


def test_only_allow_listed_files_count_towards_the_size():
    names = ["config.json", "model.safetensors", "pytorch_model.bin", "tf_model.h5", "onnx/model.onnx",
             "vocab.txt", "modeling_evil.py"]
    assert hub.files_to_fetch(names) == ["config.json", "model.safetensors", "vocab.txt"]
    assert hub.files_to_fetch(["config.json", "pytorch_model.bin"]) == ["config.json", "pytorch_model.bin"]
    # 5 GB of TF/ONNX weights beside 90 MB of safetensors: allowed, since only the safetensors are fetched
    hub.check_download_size("a/b", [("model.safetensors", 90_000_000), ("tf_model.h5", 5_000_000_000),
                                    ("onnx/model.onnx", 5_000_000_000), ("config.json", None)], 100_000_000)
    with pytest.raises(hub.DownloadTooLargeError, match="120 MB of weights; at most 100 MB"):
        hub.check_download_size("a/b", [("model-00001-of-00002.safetensors", 60_000_000),
                                        ("model-00002-of-00002.safetensors", 60_000_000)], 100_000_000)
    hub.check_download_size("a/b", [("model.safetensors", 1_400_000_000)])      # the default cap: 1,500 MB


def test_a_repo_over_the_cap_is_refused_before_any_download(online, monkeypatch):
    fake = FakeHub("answer", _json_http({
        "id": "someone/huge-bert", "sha": COMMIT, "private": False,
        "siblings": [{"rfilename": "config.json", "size": 600},
                     {"rfilename": "model.safetensors", "size": 4_000_000_000}],
    }))
    monkeypatch.setattr(constants, "ENDPOINT", fake.endpoint)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _no_hub_call)
    try:
        with pytest.raises(hub.DownloadTooLargeError, match="4,000 MB"):
            engine.load("someone/huge-bert", max_download_bytes=100_000_000)
        assert fake.connections >= 1
    finally:
        fake.close()


def test_a_config_over_the_parameter_cap_is_refused_before_any_weights(online, monkeypatch, tmp_path):
    """The hub's config.json is fetched alone and checked first: a BERT claiming 2048 x 48 layers is refused
    without downloading a byte of weights (snapshot_download is never called)."""
    fake = FakeHub("answer", _json_http({
        "id": "someone/claims-huge", "sha": COMMIT, "private": False,
        "siblings": [{"rfilename": "config.json", "size": 600}, {"rfilename": "model.safetensors", "size": 1000}],
    }))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "bert", "hidden_size": 2048, "num_hidden_layers": 48,
                                  "num_attention_heads": 16, "intermediate_size": 8192}), encoding="utf-8")
    fetched: list[str] = []
    monkeypatch.setattr(constants, "ENDPOINT", fake.endpoint)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download",
                        lambda repo_id, filename, **kwargs: fetched.append(filename) or str(config))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _no_hub_call)
    try:
        with pytest.raises(ModelTooLargeError, match="hub:someone/claims-huge: config.json describes"):
            engine.load("someone/claims-huge", max_parameters=100_000_000)
        assert fetched == ["config.json"]
    finally:
        fake.close()
