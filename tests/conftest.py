"""Shared fixtures for the checkpoint / key-mapping / hub tests: a tiny config, a tiny
WordPiece vocabulary, and a guard that refuses every non-loopback connection."""
from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import socket
import tempfile
from pathlib import Path

# Before anything imports huggingface_hub (it reads these once): tests that switch the hub "on" against
# a fake endpoint must not leave telemetry queued for huggingface.co (the load test's guard saw it).
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
# The token cache (engine.data.token_cache) of this test session, never the user's ~/.cache; command lines
# the tests start inherit it.
os.environ["BERT_ENGINE_CACHE"] = tempfile.mkdtemp(prefix="explorer-test-cache-")
atexit.register(shutil.rmtree, os.environ["BERT_ENGINE_CACHE"], ignore_errors=True)   # gone with the session

import pytest
import torch

from engine.model.config import BertConfig
from engine.text.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

WORDS = ("the a an is was of and to in it that he she they we you on for with as at by from this "
         "cat dog sat mat bird sang tree car red blue big small run ran walk play played house "
         "question answer what who where when why how bert model test word piece text token").split()
SUFFIXES = ("##s", "##ed", "##ing", "##ly", "##er", "##e", "##t", "##n", "##d", "##a")
LETTERS = tuple("abcdefghijklmnopqrstuvwxyz") + tuple(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz")
PUNCT = tuple(".,?!'")
VOCAB = list(dict.fromkeys(SPECIAL_TOKENS + LETTERS + PUNCT + tuple(WORDS) + SUFFIXES))


def tiny_config(**overrides) -> BertConfig:
    values = dict(vocab_size=len(VOCAB) + 3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64)
    values.update(overrides)
    return BertConfig(**values)


@pytest.fixture(scope="session")
def make_config():
    """``make_config(**overrides)``: a tiny BertConfig (32 wide, 2 layers, 4 heads)."""
    return tiny_config


@pytest.fixture
def inputs(make_config):
    """A padded batch for the tiny config: rows of 11, 8 and 5 real tokens."""
    from support.reference import batch

    return batch(make_config(), batch_size=3, seq_len=11)


@pytest.fixture(scope="session")
def tiny_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab({tok: i for i, tok in enumerate(VOCAB)})


def _loopback(host) -> bool:
    if host in (None, "localhost", ""):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def no_internet(monkeypatch):
    """Any attempt to resolve or connect to a non-loopback host fails the test loudly."""
    real_getaddrinfo, real_connect, real_connect_ex = socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex
    attempts: list[str] = []

    def refuse(what):
        attempts.append(str(what))
        raise OSError(f"test guard: network access to {what!r} is not allowed in tests")

    def getaddrinfo(host, *args, **kwargs):
        host_text = host.decode() if isinstance(host, bytes) else host
        return real_getaddrinfo(host, *args, **kwargs) if _loopback(host_text) else refuse(host_text)

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            refuse(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            refuse(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield attempts
    assert not attempts, f"the code under test tried to reach the network: {attempts}"


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run fastest on one intra-op thread, and it keeps them immune to a busy
    machine (two OpenMP threads spinning on a loaded 2-core box made files 3-30x slower).
    Modules opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# The quick selection, `python -m pytest -m quick` (issue 36): the core for day-to-day work, meant for 3 minutes on
# 2 idle cores (measured times: CONTRIBUTING "Running the tests"). Left out by folder, file or test name: what serves the whole app
# over HTTP or drives a browser, starts other processes (torchrun, SIGKILLs, the docs' snippets) or rehearses the
# GPU session, or walks every model family at once, and tests marked `slow` (a whole run end to end, seconds each).
# CI runs everything; a new test is quick unless it lands in one of
# these.
NOT_QUICK_FOLDERS = {"app", "bench", "chaos", "e2e", "scripts"}
NOT_QUICK_FILES = {"test_multinode.py", "test_engine_docs.py",
                   "test_notebook.py",        # starts a Jupyter kernel and runs docs/notebook.ipynb in it
                   # whole small experiments: every arm pretrained, measured at checkpoints, fine-tuned
                   "test_shared_pretraining.py", "test_series.py", "test_syntax_metrics.py",
                   # every family at once (tokenizers trained, models saved by transformers): CI's, not the core's
                   "test_finetune_families.py", "test_attention_families.py", "test_tag_families.py",
                   "test_pipelines_newer_families.py"}
NOT_QUICK_NAMES = ("torchrun", "sigkill", "ddp", "killed", "test_cli_")
TESTS = Path(__file__).resolve().parent


def _left_out(path: Path) -> bool:
    """Whether a folder or file under tests/ is outside the quick selection."""
    parts = Path(path).resolve().relative_to(TESTS).parts
    return bool(parts) and (parts[0] in NOT_QUICK_FOLDERS or parts[-1] in NOT_QUICK_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the quick selection (``-m quick``); see ``NOT_QUICK_*``."""
    for item in items:
        if not (_left_out(item.path) or any(word in item.name for word in NOT_QUICK_NAMES)
                or item.get_closest_marker("slow")):
            item.add_marker(pytest.mark.quick)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With exactly ``-m quick``, the left-out folders and files are not even imported (half the collection)."""
    if config.getoption("markexpr", "") != "quick" or TESTS not in Path(collection_path).resolve().parents:
        return None
    return True if _left_out(collection_path) else None
