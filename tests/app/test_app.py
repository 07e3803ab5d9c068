"""The app end to end: launch in-process, call every api_name with gradio_client."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

# Offline before gradio is imported (app.py does the same).
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

import explorer.page  # noqa: E402
from explorer.tokenize import tab as tokenize_tab  # noqa: E402
from explorer.services import Services, default_services  # noqa: E402
from support.app_helpers import serve  # noqa: E402


@pytest.fixture(scope="module")
def services() -> Services:
    return default_services()


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    import app

    with serve(app.create_app()) as running:
        yield running


def _tokenize(client: Client, text: str, pair: str = "", max_length: int = 128, model: str | None = None) -> tuple[Any, ...]:
    return tuple(client.predict(model, text, pair, max_length, api_name="/tokenize"))


def _column(table: dict, name: str) -> list[Any]:
    i = table["headers"].index(name)
    return [row[i] for row in table["data"]]


# --- through the server ---------------------------------------------------------------

def test_api_lists_tokenize_only(client: Client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert "/tokenize" in endpoints
    assert not any("example" in name for name in endpoints)  # example loaders stay private


def test_tokenize_single_text(client: Client) -> None:
    highlights, summary, table, plot = _tokenize(client, "UNwant\u00e9d,running")
    assert table["headers"] == tokenize_tab.TABLE_COLUMNS
    # bert-base-uncased knows "unwanted"; lower-casing and accent stripping happen first
    assert _column(table, "token") == ["[CLS]", "unwanted", ",", "running", "[SEP]"]
    assert _column(table, "text") == ["", "UNwant\u00e9d", ",", "running", ""]  # exact source characters
    assert _column(table, "start") == [0, 0, 8, 9, 0]
    assert _column(table, "type id") == [0] * 5
    assert _column(table, "special") == [True, False, False, False, True]
    assert _column(table, "segment") == ["special", "A", "A", "A", "special"]
    for piece in ("[CLS]", "unwanted", ",", "running", "[SEP]"):          # the pieces the model sees
        assert f">{piece}</span>" in highlights
    assert "**5 tokens**" in summary and "[CLS] A×3 [SEP]" in summary and "truncated" not in summary
    assert plot["type"] == "plotly" and '"unwanted"' in plot["plot"]


def test_rare_words_split_into_continuation_pieces(client: Client) -> None:
    highlights, _, table, _ = _tokenize(client, "Tokenization embeddings")
    assert _column(table, "token")[1:-1] == ["token", "##ization", "em", "##bed", "##ding", "##s"]
    assert _column(table, "word id")[1:-1] == ["0", "0", "1", "1", "1", "1"]
    # one word group, one colour: "token" and "##ization" side by side
    assert '<span class="wp-word"><span class="wp wp-A wp-w0"' in highlights and ">##ization</span></span>" in highlights


def test_tokenize_pair_type_ids(client: Client) -> None:
    _, summary, table, plot = _tokenize(client, "Who was Jim Henson?", "Jim Henson was a nice puppet")
    tokens = _column(table, "token")
    assert tokens == ["[CLS]", "who", "was", "jim", "henson", "?", "[SEP]",
                      "jim", "henson", "was", "a", "nice", "puppet", "[SEP]"]
    assert _column(table, "type id") == [0] * 7 + [1] * 7
    assert _column(table, "segment") == ["special"] + ["A"] * 5 + ["special"] + ["B"] * 6 + ["special"]
    assert "[CLS] A×5 [SEP] B×6 [SEP]" in summary
    assert "Segment B" in plot["plot"]


def test_truncation_notice(client: Client) -> None:
    _, summary, table, _ = _tokenize(client, " ".join("abcdefghijkl"), max_length=8)
    assert len(table["data"]) == 8
    assert "truncated: 6 tokens dropped at max length 8" in summary


def test_unknown_tokens_counted(client: Client) -> None:
    _, summary, table, _ = _tokenize(client, "caf\u00e9 \U0001F600")
    assert _column(table, "token") == ["[CLS]", "cafe", "[UNK]", "[SEP]"]
    assert "**[UNK]**: 1 (50%" in summary          # explorer.formatting.percent: 3 significant digits


def test_empty_text_is_a_clear_error_and_app_keeps_serving(client: Client) -> None:
    for bad in ("", "   \n\t"):
        with pytest.raises(AppError, match="Type some text to tokenize"):
            _tokenize(client, bad)
    _, _, table, _ = _tokenize(client, "still here")
    assert _column(table, "token") == ["[CLS]", "still", "here", "[SEP]"]


def test_too_long_text_is_a_clear_error(client: Client) -> None:
    with pytest.raises(AppError, match="too long.*100,000"):
        _tokenize(client, "a " * 50_001)
    with pytest.raises(AppError, match="text pair is too long"):
        _tokenize(client, "ok", "b" * 100_001)


def test_bad_max_length_is_a_clear_error(client: Client) -> None:
    with pytest.raises(AppError, match="less than minimum value 8"):  # the slider's own check
        _tokenize(client, "hello", max_length=2)
    _tokenize(client, "hello", max_length=8)


def test_bad_max_length_direct_call(services: Services) -> None:
    with pytest.raises(gr.Error, match="Max length must be a whole number from 8 to 512, got 600"):
        tokenize_tab.tokenize(services, None, "hello", "", 600)


# --- without a server -----------------------------------------------------------------

def test_engine_value_error_becomes_gr_error(services: Services) -> None:
    class Exploding:
        def explain(self, *args: Any, **kwargs: Any) -> Any:
            raise ValueError("max_length is too small")

    run = explorer.ui_errors.friendly_errors(tokenize_tab.tokenize)
    with pytest.raises(gr.Error, match="max_length is too small"):
        run(Services(tokenizer=Exploding()), None, "hi", "", 16)  # type: ignore[arg-type]


def test_tokenize_function_outputs(services: Services) -> None:
    highlights, summary, table, fig = tokenize_tab.tokenize(services, None, "hi there", "  ", 32)
    assert list(table.columns) == tokenize_tab.TABLE_COLUMNS
    assert table["token"].tolist() == ["[CLS]", "hi", "there", "[SEP]"]
    assert "[CLS] A×2 [SEP]" in summary  # whitespace-only pair means no pair
    assert sum(len(tr.x) for tr in fig.data) == 4
    assert '<span class="wp wp-special"' in highlights and ">[CLS]</span>" in highlights


def test_build_app_offline(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the app opens no network connection (fonts, hub, analytics)."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def guarded_connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if host not in ("127.0.0.1", "localhost", "::1"):
            attempts.append(address)
            raise OSError(f"network disabled in test: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    demo = explorer.page.build_app(services)
    assert isinstance(demo, gr.Blocks)
    assert attempts == []
    # Built-in theme with system fonts only: no web-font stylesheet to fetch.
    assert explorer.page.THEME._stylesheets == []
    assert all(isinstance(f, str) for f in explorer.page.THEME._font + explorer.page.THEME._font_mono)


def test_importing_app_sets_offline_env() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GRADIO_ANALYTICS_ENABLED", "HF_HUB_OFFLINE")}
    code = ("import os, app; import gradio; "
            "print(os.environ['GRADIO_ANALYTICS_ENABLED'], os.environ['HF_HUB_OFFLINE'], callable(app.main))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "1", "True"]
