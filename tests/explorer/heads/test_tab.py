"""Heads tab, served: every section's public endpoint answers like its handler through ``gradio_client``, a
model without the head is one sentence (and the app keeps serving), each section says whether the picked
model has its head, and every user event clears its outputs when it fails."""
from __future__ import annotations


import gradio as gr
import pytest
from gradio_client.exceptions import AppError

from support.event_helpers import failure_clears
from explorer.glossary import gloss
from explorer.heads import tab
from explorer.heads import choose as choose_section
from explorer.heads import classify as classify_section
from explorer.heads import next_sentence as nsp_section
from explorer.heads import tag as tag_section
from support.heads_helpers import head_services
from support.probing_helpers import tab_app

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def services(tiny_tokenizer):
    return head_services(tiny_tokenizer)


@pytest.fixture(scope="module")
def app(services) -> tuple[gr.Blocks, dict]:
    return tab_app(services, tab.build)



def test_every_user_event_clears_its_outputs_on_failure(app) -> None:
    demo, widgets = app
    for _, _, section in tab.SECTIONS:
        w = widgets[section.HEAD]
        for suffix in ("", "_submit", "_example_run"):
            assert failure_clears(demo, section.API_NAME + suffix, [w[name] for name in section.OUTPUTS]), \
                section.API_NAME + suffix


def test_api_lists_one_public_endpoint_per_section(client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    for _, _, section in tab.SECTIONS:
        assert f"/{section.API_NAME}" in endpoints
    assert not any("example" in name or "submit" in name for name in endpoints)


def test_api_next_sentence(client, services) -> None:
    summary, bars, attention, results = client.predict("default", "the cat sat.", "it ran to the house.",
                                                       api_name="/next_sentence")
    expected = nsp_section.predict(services, "default", "the cat sat.", "it ran to the house.")
    assert summary == expected[0] and results == expected[3]
    assert bars["type"] == "plotly" and attention["type"] == "plotly"
    with pytest.raises(AppError, match="has no next sentence \\(NSP\\) head"):
        client.predict("classifier", "the cat sat.", "it ran.", api_name="/next_sentence")
    with pytest.raises(AppError, match="Type sentence B"):
        client.predict("default", "the cat sat.", "", api_name="/next_sentence")
    assert client.predict("default", "a cat.", "a dog.", api_name="/next_sentence")[3][0]["label"] in ("IsNext",
                                                                                                      "NotNext")


def test_api_classify(client, services) -> None:
    summary, bars, results = client.predict("classifier", "the cat sat.", api_name="/classify")   # pair optional
    assert [summary, results] == list(classify_section.predict(services, "classifier", "the cat sat.", "")[::2])
    assert bars["type"] == "plotly" and {r["label"] for r in results} == {"negative", "neutral", "positive"}
    paired = client.predict("classifier", "the cat sat.", "it ran.", api_name="/classify")
    assert paired[2] == classify_section.predict(services, "classifier", "the cat sat.", "it ran.")[2]
    with pytest.raises(AppError, match="has no sequence classification head"):
        client.predict("default", "the cat sat.", api_name="/classify")


def test_api_choose(client, services) -> None:
    choices = "it ran to the house.\na red car.\nthe bird sang."
    summary, bars, results = client.predict("chooser", "the cat sat.", choices, api_name="/choose")
    expected = choose_section.predict(services, "chooser", "the cat sat.", choices)
    assert [summary, results] == [expected[0], expected[2]] and bars["type"] == "plotly"
    assert [r["choice"] for r in results] == choices.splitlines()
    with pytest.raises(AppError, match="Give 2 to 5 choices, one per line; got 1"):
        client.predict("chooser", "the cat sat.", "only one", api_name="/choose")
    with pytest.raises(AppError, match="has no multiple choice head"):
        client.predict("default", "the cat sat.", choices, api_name="/choose")


def test_api_tag_words(client, services) -> None:
    text = "walter played with xavier in paris."
    summary, tagged, table, results = client.predict("tagger", text, api_name="/tag_words")
    expected = tag_section.predict(services, "tagger", text)
    assert [summary, tagged, results] == [expected[0], expected[1], expected[3]]
    assert table["headers"] == tag_section.TABLE_COLUMNS and [row[0] for row in table["data"]] == text[:-1].split() + ["."]
    with pytest.raises(AppError, match="has no token classification head"):
        client.predict("chooser", text, api_name="/tag_words")


@pytest.mark.parametrize("key", ["default", "encoder", "classifier"])
def test_each_section_says_whether_the_picked_model_has_its_head(services, key) -> None:
    loaded = services.model(key)
    for _, _, section in tab.SECTIONS:
        status = tab.head_status(services, key, section.HEAD)
        if section.HEAD in loaded.heads:
            assert status.startswith("✅ The picked model has a ")
        else:
            assert status.startswith("⚠️ The picked model (") and "then pick the result in the model picker" in status


@pytest.mark.parametrize("key,prefix", [("default", "next_sentence"), ("classifier", "classify"),
                                        ("tagger", "tag_words"), ("chooser", "choose"), ("encoder", None)])
def test_warm_up_runs_the_examples_of_the_heads_a_model_has(services, key, prefix) -> None:
    calls = tab.example_calls(services.model(key))
    assert {name.split(" ")[0] for name, _ in calls} == ({prefix} if prefix else set())
    for _, call in calls:
        call()


def test_the_words_a_learner_may_not_know_are_linked_to_the_glossary_once(app) -> None:
    """NSP, pooler, logit, fine-tune and UPOS: each an <abbr> whose hover title is its glossary sentence, in the
    Markdown the page shows, once per section that uses the word."""
    demo, _ = app
    shown = "\n".join(str(b.value) for b in demo.blocks.values() if isinstance(b, gr.Markdown))
    linked = {(tab.INTRO, "fine-tune", "fine-tuned"), (nsp_section.INTRO, "NSP", None),
              (nsp_section.INTRO, "pooler", None), (classify_section.INTRO, "logit", None),
              (classify_section.INTRO, "pooler", "pooled"), (choose_section.INTRO, "logit", None),
              (tag_section.INTRO, "UPOS", None)}
    for intro, term, word in linked:
        link = gloss(term, word)
        assert intro.count(link) == 1 and link in shown, term
    assert 'title="A raw score before the softmax' in shown
