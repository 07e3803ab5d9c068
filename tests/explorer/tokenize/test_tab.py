"""Tokenize tab: the handler's four outputs, the piece view through the server, errors that clear old results."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from explorer.services import Services, default_services  # noqa: E402
from explorer.tokenize import tab  # noqa: E402
from explorer.tokenize.pieces import pieces_html  # noqa: E402
from support.event_helpers import failure_clears  # noqa: E402
from support.probing_helpers import make_services, tab_app  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bundled() -> Services:
    return default_services()


@pytest.fixture(scope="module")
def services(tiny_tokenizer) -> Services:
    return make_services(tiny_tokenizer)


@pytest.fixture(scope="module")
def app(services) -> tuple[gr.Blocks, dict]:
    return tab_app(services, tab.build)



def test_handler_shows_the_pieces_the_model_sees(bundled) -> None:
    html, summary, table, fig = tab.tokenize(bundled, None, "Tokenization of 🤗", "", 32)
    expl = bundled.tokenizer.explain("Tokenization of 🤗", max_length=32)
    assert html == pieces_html(expl, "[UNK]")
    assert table["token"].tolist() == ["[CLS]", "token", "##ization", "of", "[UNK]", "[SEP]"]
    assert ">##ization</span>" in html and ">[UNK]<sub" in html and "Tokenization" not in html.split("wp-strip")[1]
    assert "**[UNK]**: 1 (25% of non-special tokens)" in summary      # a percentage, 3 significant digits
    assert sum(len(tr.x) for tr in fig.data) == 6


def test_handler_uses_the_picked_models_tokenizer(services, tiny_tokenizer) -> None:
    html, _, table, _ = tab.tokenize(services, "default", "the cat sat", "", 16)
    assert table["token"].tolist() == tiny_tokenizer.explain("the cat sat", max_length=16).encoding.tokens
    assert html == pieces_html(tiny_tokenizer.explain("the cat sat", max_length=16))


def test_a_third_of_unknowns_prints_three_digits(bundled) -> None:
    _, summary, _, _ = tab.tokenize(bundled, None, "a 🤗 b", "", 16)
    assert "(33.3% of non-special tokens)" in summary


def test_every_user_event_clears_its_outputs_on_failure(app) -> None:
    demo, w = app
    outputs = [w["pieces"], w["summary"], w["table"], w["strip"]]
    for name in ("tokenize", "tokenize_submit", "tokenize_example_run"):
        assert failure_clears(demo, name, outputs), name


def test_api_tokenize_returns_the_piece_view(client, tiny_tokenizer) -> None:
    html, summary, table, plot = client.predict("default", "the cat sat", "on the mat", 32, api_name="/tokenize")
    expl = tiny_tokenizer.explain("the cat sat", "on the mat", max_length=32)
    assert html == pieces_html(expl)
    assert table["data"][0][1] == "[CLS]" and plot["type"] == "plotly" and "tokens" in summary


def test_api_error_then_serves_again(client) -> None:
    with pytest.raises(AppError, match="Type some text to tokenize"):
        client.predict("default", "   ", "", 32, api_name="/tokenize")
    html, *_ = client.predict("default", "the cat", "", 32, api_name="/tokenize")
    assert 'class="wp-strip"' in html
