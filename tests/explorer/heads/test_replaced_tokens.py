"""Heads tab, Replaced tokens: on a random ELECTRA discriminator saved by transformers, the handler's probabilities
are the engine's and its verdict counts the text's tokens over the threshold; the strip is escaped HTML marking
exactly those tokens; a BERT model gets one sentence naming the head and who has one; a bad threshold or text is a
clear error; the served endpoint answers as the handler."""
from __future__ import annotations

import math
from html.parser import HTMLParser

import gradio as gr
import pytest
from gradio_client.exceptions import AppError

from engine.checkpoints.hf_format import load
from engine.probes.heads.replaced_tokens import ReplacedTokensResult, replaced_tokens
from explorer.formatting import code, percent, rounded
from explorer.heads import replaced_tokens as section
from explorer.heads import tab
from explorer.heads.common import head_status
from explorer.models.description import missing_head_message
from explorer.heads.replaced_html import MAX_ALPHA, MIN_ALPHA, fill, replaced_html
from explorer.ui_errors import friendly_errors
from support.probing_helpers import make_services, tab_app
from support.saved_families import save_family_model

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the chef ate the meal."


class Chips(HTMLParser):
    """Each chip of the strip as [class, title, token text, caption]."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chips: list[list[str]] = []
        self.where = ""

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if "rt" in classes:
            self.chips.append([" ".join(classes), attrs.get("title") or "", "", ""])
        self.where = classes[0] if classes else ""

    def handle_endtag(self, tag):
        self.where = ""

    def handle_data(self, data):
        if self.where in ("rt-text", "rt-p"):
            self.chips[-1][2 if self.where == "rt-text" else 3] += data


def chips(html: str) -> list[list[str]]:
    view = Chips()
    view.feed(html)
    return view.chips


@pytest.fixture(scope="module")
def services(tiny_tokenizer, tmp_path_factory):
    """``default`` (BERT: MLM + NSP + QA), ``encoder`` (no heads) and ``electra``: a random ElectraForPreTraining
    saved by transformers beside its tokenizer, read with ``hf_format.load``."""
    services = make_services(tiny_tokenizer)
    folder = save_family_model("electra", tmp_path_factory.mktemp("electra"), "ForPreTraining")
    services.models.pin("electra", load(folder))
    return services


@pytest.fixture(scope="module")
def engine_result(services) -> ReplacedTokensResult:
    return replaced_tokens(services.model("electra"), TEXT)


def split_threshold(result: ReplacedTokensResult) -> float:
    """A threshold between the text tokens' P(replaced) values, so some are over it and some under."""
    values = sorted({p for p, role in zip(result.probabilities, result.roles) if role is None})
    assert len(values) >= 2, "the random discriminator gives every token the same probability"
    middle = len(values) // 2
    return (values[middle - 1] + values[middle]) / 2


def test_the_handler_gives_the_engines_probabilities(services, engine_result) -> None:
    summary, strip, results = section.predict(services, "electra", TEXT)
    assert [r["token"] for r in results] == engine_result.tokens
    assert [r["role"] for r in results] == engine_result.roles
    assert [r["probability"] for r in results] == [rounded(p) for p in engine_result.probabilities]
    assert [r["logit"] for r in results] == [rounded(x) for x in engine_result.logits]
    assert all(math.isclose(1 / (1 + math.exp(-x)), p, rel_tol=1e-5)
               for x, p in zip(engine_result.logits, engine_result.probabilities))
    assert engine_result.roles[0] is not None and engine_result.roles[-1] is not None   # the specials, by role
    shown = chips(strip)
    assert [c[2] for c in shown] == engine_result.tokens
    assert [c[3].split(" ")[0] for c in shown] == [percent(p) for p in engine_result.probabilities]
    assert summary.endswith(f"model: {engine_result.source}")


def test_the_verdict_counts_the_tokens_over_the_threshold(services, engine_result) -> None:
    threshold = split_threshold(engine_result)
    counted = [i for i, role in enumerate(engine_result.roles) if role is None]
    over = [i for i in counted if engine_result.probabilities[i] > threshold]
    assert 0 < len(over) < len(counted)
    summary, strip, results = section.predict(services, "electra", TEXT, threshold)
    assert summary.startswith(f"The discriminator calls **{len(over)} of {len(counted)}** tokens replaced "
                              f"(P(replaced) over {percent(threshold)}): "
                              + ", ".join(code(engine_result.tokens[i]) for i in over) + " · model: ")
    assert [r["index"] for r in results if r["replaced"]] == over == engine_result.replaced(threshold)
    shown = chips(strip)
    assert [i for i, c in enumerate(shown) if "rt-replaced" in c[0]] == over
    assert all(c[3].endswith(" · replaced") == (i in over) for i, c in enumerate(shown))


def test_nothing_over_the_threshold_names_the_most_suspect_token(services, engine_result) -> None:
    summary, _, results = section.predict(services, "electra", TEXT, 1.0)
    counted = [i for i, role in enumerate(engine_result.roles) if role is None]
    top = max(counted, key=lambda i: engine_result.probabilities[i])
    assert summary.startswith(f"The discriminator calls **none of the {len(counted)}** tokens replaced")
    assert f"the most suspect is {code(engine_result.tokens[top])}" in summary
    assert not any(r["replaced"] for r in results)
    everything = section.predict(services, "electra", TEXT, 0.0)[2]           # specials are never called replaced
    assert [r["replaced"] for r in everything] == [role is None for role in engine_result.roles]


@pytest.mark.parametrize("key,has", [("default", "masked LM"), ("encoder", "none (encoder only)")])
def test_a_bert_model_is_told_which_models_have_the_head(services, key, has) -> None:
    with pytest.raises(gr.Error) as raised:
        friendly_errors(section.predict)(services, key, TEXT)
    message = str(raised.value.message)
    assert message.startswith(f"The picked model ({services.model(key).source}) has no replaced-token detection "
                              f"head (its heads: {has}")
    assert "ELECTRA models saved as ElectraForPreTraining have one" in message
    assert "then pick the result in the model picker above." in message and "\n" not in message
    assert head_status(services, key, section.HEAD) == f"⚠️ {message}"
    assert head_status(services, "electra", section.HEAD).startswith("✅ The picked model has a replaced-token")


def test_the_other_sections_still_name_berts_heads_for_an_electra(services) -> None:
    message = missing_head_message(services.model("electra"), "nsp")
    assert "has no next sentence (NSP) head (its heads: replaced-token detection" in message
    assert "To try this, pretrain one" in message


@pytest.mark.parametrize("threshold,match", [
    (1.5, "The threshold must be from 0 to 1"), (-0.1, "The threshold must be from 0 to 1"),
    ("abc", "The threshold must be a number from 0 to 1, got 'abc'"), (None, "must be a number"),
    (True, "must be a number"), (float("nan"), "must be a number")])
def test_a_bad_threshold_is_a_clear_error(services, threshold, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(section.predict)(services, "electra", TEXT, threshold)


def test_a_threshold_typed_as_text_is_read_and_an_empty_text_refused(services, engine_result) -> None:
    assert section.predict(services, "electra", TEXT, "0.5") == section.predict(services, "electra", TEXT, 0.5)
    with pytest.raises(gr.Error, match="Type a sentence"):
        friendly_errors(section.predict)(services, "electra", "  ")


def test_the_strip_is_escaped_and_marks_only_text_tokens_over_the_threshold() -> None:
    tokens = ["<s>", 'a"b', "&amp;", "</s>"]
    html = replaced_html(tokens, [0.9, 0.8, 0.2, 0.95], ["cls", None, None, "sep"], 0.5)
    assert "<s>" not in html and "</s>" not in html and '"b' not in html
    shown = chips(html)
    assert [c[2] for c in shown] == tokens                                  # read back as written
    assert [c[0] for c in shown] == ["rt rt-special", "rt rt-replaced", "rt rt-token", "rt rt-special"]
    assert shown[0][1] == "P(replaced) = 90% · special token (cls): never counted"
    assert [c[3] for c in shown] == ["90%", "80% · replaced", "20%", "95%"]
    with pytest.raises(ValueError, match="2 tokens, 1 probabilities and 2 roles"):
        replaced_html(["a", "b"], [0.1], [None, None], 0.5)


def test_the_fill_deepens_with_the_probability() -> None:
    alphas = [float(fill(p).rsplit(",", 1)[1].rstrip(")")) for p in (0.0, 0.5, 1.0, 2.0, float("nan"))]
    assert alphas[:3] == sorted(alphas[:3]) and alphas[0] == pytest.approx(MIN_ALPHA)
    assert alphas[2] == alphas[3] == pytest.approx(MAX_ALPHA) and alphas[4] == pytest.approx(MIN_ALPHA)


def test_the_verdict_shortens_a_long_list() -> None:
    n = section.MAX_NAMED + 3
    result = ReplacedTokensResult("x", "m", ["<s>", *(f"w{i}" for i in range(n)), "</s>"], ["cls", *[None] * n, "sep"],
                                  [0.0] * (n + 2), [0.0, *[0.9] * n, 0.0])
    line = section.verdict(result, 0.5)
    assert line.startswith(f"The discriminator calls **{n} of {n}** tokens replaced")
    assert "`w0`" in line and f"`w{section.MAX_NAMED}`" not in line and " and 3 more · model: m" in line


def test_warm_up_runs_the_examples_on_a_discriminator(services) -> None:
    calls = tab.example_calls(services.model("electra"))
    assert [name for name, _ in calls] == [f"replaced_tokens {i}" for i in range(len(section.EXAMPLES))]
    assert all(isinstance(call(), ReplacedTokensResult) for _, call in calls)
    assert ["The chef cooked the meal."] in section.EXAMPLES and ["The chef ate the meal."] in section.EXAMPLES


@pytest.fixture(scope="module")
def app(services):
    return tab_app(services, section.build)


def test_the_endpoint_answers_as_the_handler(client, services) -> None:
    summary, strip, results = client.predict("electra", TEXT, api_name="/replaced_tokens")   # threshold 0.5
    assert [summary, strip, results] == list(section.predict(services, "electra", TEXT))
    named = client.predict(model_key="electra", text=TEXT, threshold=0.2, api_name="/replaced_tokens")
    assert named[0] == section.predict(services, "electra", TEXT, 0.2)[0]
    with pytest.raises(AppError, match="has no replaced-token detection head"):
        client.predict("default", TEXT, api_name="/replaced_tokens")
