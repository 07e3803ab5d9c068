"""``explorer.tab_registry.TABS`` is the one list of the app's tabs: ``build_app`` opens exactly those tabs, in that
order, and the demo warm-up runs exactly the calls their modules give."""
from __future__ import annotations

import gradio as gr
import pytest

import explorer.page
from explorer.serving import warmup as warmup
from explorer.tab_registry import TABS, Tab, registered
from support.probing_helpers import make_services
from support.registry_checks import check_tabs


@pytest.fixture(scope="module")
def services(tiny_tokenizer, tmp_path_factory):
    return make_services(tiny_tokenizer, tmp_path_factory.mktemp("runs"))


def test_tabs_are_listed_once_in_the_order_shown() -> None:
    check_tabs()            # the built-ins in order, each title and id once, the Glossary last


def check_page(demo: gr.Blocks) -> list[tuple[str, str]]:
    """``demo`` opens exactly the registered tabs, in order, and every ``gr.Tabs`` wraps its titles; the
    (title, id) of each tab it opened."""
    outer = min((block for block in demo.blocks.values() if isinstance(block, gr.Tabs)), key=lambda b: b._id)
    opened = [(child.label, child.id) for child in outer.children]
    assert opened == [(tab.title, tab.id) for tab in TABS]
    # At phone width the tab titles wrap onto more rows, the app's and a tab's inner ones (Heads): none hides
    # behind a "•••" menu.
    tabs = [block for block in demo.blocks.values() if isinstance(block, gr.Tabs)]
    assert len(tabs) >= 2 and all(block.overflow_behavior == "wrap" for block in tabs)
    return opened


def test_build_app_opens_exactly_the_registered_tabs(services) -> None:
    check_page(explorer.page.build_app(services))


class ToyTab:
    """A tab's module as a new tab's ``explorer/<name>/tab.py`` would be: a text box, a button and an answer,
    and one warm-up call."""

    @staticmethod
    def build(services, picker) -> dict:
        with gr.Row():
            text, count = gr.Textbox(label="Toy text", value="the cat sat"), gr.Number(label="Toy tokens")
        button = gr.Button("Count the tokens")
        button.click(lambda t: len(services.tokenizer.encode(t).input_ids), [text], [count], api_name="toy_count",
                     api_visibility="private")
        return {"text": text, "count": count, "button": button}

    @staticmethod
    def example_calls(loaded) -> list:
        return [("toy 0", lambda: len(loaded.tokenizer.encode("the cat sat").input_ids))]


TOY_TAB = Tab("Toy", "toy", ToyTab())


def test_a_tab_added_with_one_registry_row_is_opened_and_warmed_up_and_the_checks_still_hold(services) -> None:
    """The recipe's "a module + one row in TABS", carried out for the length of a ``with`` block: the page builds
    with the toy tab in it, its warm-up call runs, and the registry checks above pass with it as without it."""
    before = list(TABS)
    with registered(TOY_TAB):
        check_tabs()                               # the built-ins still in order, once each, the Glossary last
        assert TABS[-2] is TOY_TAB and len(TABS) == len(before) + 1
        demo = explorer.page.build_app(services)
        assert ("Toy", "toy") in check_page(demo)
        assert any(isinstance(b, gr.Textbox) and b.label == "Toy text" for b in demo.blocks.values())
        calls = dict(warmup.example_calls(services.model("default")))
        assert calls["toy 0"]() == 5                                        # [CLS] the cat sat [SEP]
        with pytest.raises(ValueError, match="registered already"):
            with registered(Tab("Toy", "toy-2", ToyTab())):
                pass
    assert TABS == before
    check_tabs()


def test_warm_up_runs_what_the_tabs_give(services) -> None:
    loaded = services.model("default")                      # masked LM, next sentence and QA heads
    calls = warmup.example_calls(loaded)
    assert [name for name, _ in calls] == [name for tab in TABS for name, _ in tab.example_calls(loaded)]
    per_tab = {tab.id: [name for name, _ in tab.example_calls(loaded)] for tab in TABS}
    assert per_tab["tokenize"] == [f"tokenize {i}" for i in range(5)]
    assert per_tab["attention"][-1] == "neuron_view 0"
    assert per_tab["qa"] and per_tab["why"] == ["attribute 0"]
    assert per_tab["compare"] == per_tab["training"] == per_tab["finetune"] == per_tab["glossary"] == []
    assert {name.split()[0] for name in per_tab["heads"]} == {"next_sentence"}      # the one task head it has


def test_a_model_without_heads_warms_up_only_what_needs_none(services) -> None:
    bare = services.model("encoder")                       # no heads at all
    names = [name for name, _ in warmup.example_calls(bare)]
    assert {name.split()[0] for name in names} == {"tokenize", "embeddings", "attention", "neuron_view"}
    pair = dict(warmup.example_calls(bare))["tokenize 2"]()     # the example pair: [CLS] A [SEP] B [SEP]
    assert [row.type_id for row in pair.rows].count(1) > 0 and pair.rows[0].type_id == 0
    assert [row.token for row in pair.rows if row.special] == ["[CLS]", "[SEP]", "[SEP]"]


def test_the_page_script_runs_on_load_and_the_header_points_to_the_glossary(services) -> None:
    """The page script (Ctrl+Enter, glossary links: ``explorer.page.JS``, read from ``assets/page.js``) is a js-only
    load event of the app itself, so it runs however the app is launched; the header says where words are explained,
    with a dotted word to try."""
    demo = explorer.page.build_app(services)
    config = demo.get_config_file()
    scripts = [d for d in config["dependencies"] if d.get("js") == explorer.page.JS]
    assert len(scripts) == 1 and scripts[0]["targets"] == [(demo._id, "load")] and not scripts[0]["backend_fn"]
    assert scripts[0]["api_visibility"] == "private" and not scripts[0]["inputs"] and not scripts[0]["outputs"]
    for needed in ("ctrlKey", "metaKey", "button.main-action", "gloss", "Glossary", "scrollIntoView"):
        assert needed.lower() in explorer.page.JS.lower(), needed
    header = next(block for block in demo.blocks.values() if isinstance(block, gr.Markdown))
    assert "Glossary" in header.value and 'class="gloss gloss-wordpiece"' in header.value


def test_the_fields_with_an_enter_action_of_their_own_are_marked(services) -> None:
    """``explorer.page.mark_submit_fields``: a box with a submit event gets the class the page script reads (Enter
    there is Gradio's); a box without one does not (Enter there runs the tab's main button)."""
    demo = explorer.page.build_app(services)
    boxes = {block.label: block for block in demo.blocks.values() if isinstance(block, gr.Textbox)}
    assert explorer.page.SUBMIT_CLASS in boxes["Text with [MASK] tokens"].elem_classes
    assert explorer.page.SUBMIT_CLASS in boxes["Question"].elem_classes
    assert explorer.page.SUBMIT_CLASS not in (boxes["Targets (optional)"].elem_classes or [])
    assert explorer.page.SUBMIT_CLASS in explorer.page.JS
