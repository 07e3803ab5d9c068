"""A link that reopens a view (``explorer/serving/links``): every tab's schema names widgets its ``build`` returns;
values -> query -> values comes back equal for every tab and section; hostile links (a huge text, a bad layer,
an unknown key, tab or model, a local folder's path on a public instance) give the default and the usual sentence,
never a server path; a copied link stays under its length bound, a text cut with a note saying to how many
characters; and the page-load handler selects the tab, fills the fields and names the button to press."""
from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlsplit

import gradio as gr
import pytest

from explorer.models import picker as model_picker
from explorer.models.registry import ModelRegistry
from explorer.serving.access import AccessPolicy
from explorer.serving.links import wiring
from explorer.serving.links.fields import TEXT_CHARS, Kind, bounds
from explorer.serving.links.models import PickerRules
from explorer.serving.links.query import MAX_QUERY_CHARS, build_query, parse_query, widget_at
from explorer.serving.links.schemas import LINKS
from explorer.services import Services
from explorer.tab_registry import TABS
from support.finetune_helpers import save_tiny_model
from support.probing_helpers import make_services

LIMITS = {"layer": 2, "head": 3, "position": 63}         # the tiny model's: 2 layers, 4 heads
SECTIONS = [(tab, section.id) for tab, link in LINKS.items() for section in link.sections]
TRICKY = "Ünïcode & signs = ? # / , : + % [MASK] \n a new line"


class Rules:
    """``query.ModelRules`` with two usable keys and the tiny model's shape."""

    def __init__(self, usable: tuple[str, ...] = ("default", "encoder")) -> None:
        self.usable, self.asked = usable, []

    def check(self, key: str) -> tuple[str, str | None]:
        self.asked.append(key)
        return (key, None) if key in self.usable else (key, f"Unknown model {key[:20]!r}; choose one from the list.")

    def limits(self, key: str | None) -> dict[str, float]:
        return dict(LIMITS)


class App(NamedTuple):
    demo: gr.Blocks
    opening: wiring.Opening
    built: dict[str, Any]
    picker: Any

    @property
    def bound(self) -> dict[str, Any]:
        return self.opening.bound


@pytest.fixture(scope="module")
def app(tiny_tokenizer) -> App:
    """Every tab with its Copy link row and the link's page load, as ``explorer.page.build_app`` lays them out,
    on tiny pinned models."""
    services = make_services(tiny_tokenizer)
    with gr.Blocks(analytics_enabled=False) as demo:
        picker = model_picker.build(services)
        built, rows = {}, {}
        with gr.Tabs() as tabs:
            for tab in TABS:
                with gr.Tab(tab.title, id=tab.id):
                    rows[tab.id] = wiring.copy_row(tab.id)
                    built[tab.id] = tab.build(services, picker)
        opening = wiring.install(demo, tabs, rows, built, picker.dropdown, services)
        wiring.press_after(model_picker.wire_page_load(demo, services, picker, after=opening.event), opening)
    return App(demo, opening, built, picker.dropdown)


def query_of(link: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(link).query, keep_blank_values=True))


def sample(spec: Any) -> Any:
    """A value for ``spec`` other than its default, inside its range on the tiny model."""
    kind = spec.field.kind
    if kind is Kind.TEXT:
        return f"{TRICKY} ({spec.key})"
    if kind is Kind.MODEL:
        return "encoder"
    if kind in (Kind.CHOICE,):
        return spec.choices[-1]
    if kind is Kind.TOKEN:
        return "3"
    if kind is Kind.FLAG:
        return not spec.default
    if kind is Kind.NUMBERS:
        return [0, 2]
    low, high = bounds(spec, LIMITS)
    return int(high) if spec.whole else low + (high - low) / 4


def test_every_tab_has_a_link_whose_fields_are_widgets_its_build_returns(app) -> None:
    bound = app.bound
    assert list(bound) == [tab.id for tab in TABS]
    probing = {"tokenize", "embeddings", "attention", "fill_mask", "heads", "qa", "why", "compare", "syntax"}
    assert {tab for tab, b in bound.items() if any(s.specs for s in b.sections)} == probing
    for tab in probing:
        keys = {spec.key for section in bound[tab].sections for spec in section.specs}
        assert {"model", "a"} & keys and all(s.section.action for s in bound[tab].sections), tab
    attention = {spec.key for spec in bound["attention"].sections[0].specs}
    assert {"model", "text", "pair", "layer", "head", "token", "heads", "stat"} <= attention
    assert {"question", "context"} <= {spec.key for spec in bound["qa"].sections[0].specs}
    assert "targets" in {spec.key for spec in bound["fill_mask"].sections[0].specs}


@pytest.mark.parametrize("tab, section", SECTIONS)
def test_values_come_back_from_their_link(app, tab: str, section: str) -> None:
    bound = app.bound[tab]
    specs = bound.section(section).specs
    values = {spec.key: sample(spec) for spec in specs}
    built = build_query(bound, section, values)
    assert built.notes == () and len(built.query) <= MAX_QUERY_CHARS
    parsed = parse_query(app.bound, query_of(built.query), Rules())
    assert parsed is not None and parsed.warnings == []
    assert (parsed.tab, parsed.section, parsed.values) == (tab, section, values)
    assert parsed.run == bool(bound.section(section).section.action)


def test_a_link_copied_before_a_result_was_shown_fills_the_fields_without_pressing_the_button(app) -> None:
    bound = app.bound["attention"]
    built = build_query(bound, None, {"text": "The cat sat.", "layer": 2}, shown=False)
    assert query_of(built.query)["run"] == "0"
    assert parse_query(app.bound, query_of(built.query), Rules()).run is False
    assert parse_query(app.bound, {"tab": "attention", "text": "  "}, Rules()).run is False   # nothing to show
    assert parse_query(app.bound, {"tab": "attention", "text": "hi"}, Rules()).run is True    # hand-written


@pytest.mark.parametrize("raw", ["abc", "99", "0", "-1", "2.5", "nan", "inf", "1e309", ""])
def test_a_bad_layer_gives_layer_1_and_says_why(app, raw: str) -> None:
    parsed = parse_query(app.bound, {"tab": "attention", "text": "hi", "layer": raw, "head": "3"}, Rules())
    assert parsed.values["layer"] == 1 and parsed.values["head"] == 3
    assert parsed.warnings == [f"The link's layer must be a whole number from 1 to 2, not {raw!r}: layer 1 is "
                               "shown instead."]


def test_bad_choices_flags_and_lists_give_the_defaults_with_a_sentence_each(app) -> None:
    query = {"tab": "attention", "stat": "loudness", "heads": "0,9", "token": "-2", "len": "4"}
    parsed = parse_query(app.bound, query, Rules())
    assert parsed.values["stat"] == "entropy" and parsed.values["len"] == 128 and parsed.values["token"] == 0
    assert len(parsed.warnings) == 4 and any("'loudness' is not one of entropy" in w for w in parsed.warnings)
    assert parsed.values["heads"] == [0, 1, 2, 3]                        # head 9 of a 4-head model: every head
    zoom = parse_query(app.bound, {"tab": "fill_mask", "zoom": "perhaps"}, Rules())
    assert zoom.values["zoom"] is False and "must be 1 or 0" in zoom.warnings[0]
    token = parse_query(app.bound, {"tab": "embeddings", "token": "all"}, Rules())
    assert token.values["token"] == "all" and token.warnings == []


def test_unknown_keys_are_ignored_and_an_unknown_tab_or_section_says_so(app) -> None:
    bound = app.bound
    assert parse_query(bound, {}, Rules()) is None and parse_query(bound, {"__theme": "dark"}, Rules()) is None
    parsed = parse_query(bound, {"tab": "tokenize", "text": "hi", "colour": "red", "__theme": "dark"}, Rules())
    assert parsed.values == {"text": "hi"} and parsed.warnings == []
    nowhere = parse_query(bound, {"tab": "secrets", "text": "hi"}, Rules())
    assert nowhere.tab is None and "names no tab 'secrets'" in nowhere.warnings[0] and not nowhere.values
    inner = parse_query(bound, {"tab": "heads", "section": "oracle", "text": "hi"}, Rules())
    assert inner.section == "next_sentence" and "no part 'oracle'" in inner.warnings[0]
    assert parse_query(bound, {"view": "attention", "text": "hi"}, Rules()).tab == "attention"   # embed's spelling


def test_a_link_with_many_bad_values_shows_four_warnings_the_last_counting_the_rest(app) -> None:
    query = {"tab": "attention", "layer": "x", "head": "x", "len": "x", "heads": "x", "stat": "x", "token": "x"}
    parsed = parse_query(app.bound, query, Rules())
    shown = wiring.toasts(parsed.warnings)
    assert len(parsed.warnings) == 6 and shown[:3] == parsed.warnings[:3]
    assert shown[3] == "3 more of the link's values could not be used either."
    assert wiring.toasts(parsed.warnings[:4]) == parsed.warnings[:4]


def test_a_model_the_visitor_cannot_use_leaves_the_picker_alone_and_presses_nothing(app) -> None:
    rules = Rules()
    parsed = parse_query(app.bound, {"tab": "attention", "text": "hi", "model": "checkpoint:gone/step-1",
                                        "layer": "2"}, rules)
    assert "model" not in parsed.values and parsed.values["layer"] == 2 and parsed.run is False
    assert parsed.warnings == ["Unknown model 'checkpoint:gone/step'; choose one from the list."]
    huge = parse_query(app.bound, {"tab": "compare", "a": "x" * 10_000, "b": "encoder"}, rules)
    assert "a" not in huge.values and huge.values["b"] == "encoder"
    assert huge.warnings == ["The link's model A is too long (10,000 characters) to name a model; choose a model "
                             "from the list."]
    assert all(len(key) <= TEXT_CHARS for key in rules.asked)          # a huge key is never looked up


def test_a_huge_text_in_a_link_is_cut_with_a_note(app) -> None:
    parsed = parse_query(app.bound, {"tab": "fill_mask", "text": "a [MASK] b " * 5000}, Rules())
    assert len(parsed.values["text"]) == TEXT_CHARS
    assert parsed.warnings == [f"The link's text was cut to {TEXT_CHARS:,} characters (the most a link carries)."]


@pytest.mark.parametrize("word", ["word ", "ünï ", "言葉 ", "🙂 & "])
def test_a_copied_link_stays_under_its_bound_and_says_to_how_many_characters_the_text_was_cut(app, word) -> None:
    bound = app.bound["qa"]
    context = word * 3000
    built = build_query(bound, None, {"question": "Who?", "context": context, "k": 3})
    assert MAX_QUERY_CHARS - 12 <= len(built.query) <= MAX_QUERY_CHARS
    kept = query_of(built.query)["context"]
    assert context.startswith(kept) and built.notes == (f"The context was cut to {len(kept):,} characters to fit "
                                                         "a link.",)
    assert query_of(built.query)["question"] == "Who?" and query_of(built.query)["k"] == "3"
    with pytest.raises(ValueError, match="cannot fit a link"):
        build_query(app.bound["compare"], None, {"a": "m" * 5000, "text": "hi"})


def test_the_page_load_selects_the_tab_fills_the_fields_and_names_the_button(app) -> None:
    fn = next(f for f in app.demo.fns.values() if f.api_name == "open_link")
    query = {"tab": "attention", "text": "The cat sat.", "layer": "2", "head": "3", "model": "encoder"}
    out = dict(zip(map(id, fn.outputs), fn.fn("default", gr.Request(query_params=query))))
    widget = lambda *path: out[id(widget_at(app.built["attention"], path, app.picker))]      # noqa: E731
    assert (widget("text"), widget("layer"), widget("head"), widget("@picker")) == ("The cat sat.", 2, 3, "encoder")
    assert out[id(fn.outputs[0])].selected == "attention" and out[id(app.opening.run_box)] == "attention"
    skipped = widget("pair")
    assert isinstance(skipped, dict) and skipped.get("__type__") == "update"        # not in the link: left alone
    heads = fn.fn("default", gr.Request(query_params={"tab": "heads", "section": "classify", "text": "fine"}))
    heads = dict(zip(map(id, fn.outputs), heads))
    assert heads[id(app.opening.run_box)] == "heads-classify"
    assert heads[id(app.built["heads"]["tabs"])].selected == "heads_classify"
    assert heads[id(app.built["heads"]["classifier"]["text"])] == "fine"
    plain = fn.fn("default", gr.Request(query_params={}))
    assert all(isinstance(value, dict) and value.get("__type__") == "update" for value in plain)   # all skipped


def test_copy_link_sends_the_tabs_values_as_a_query(app) -> None:
    fn = next(f for f in app.demo.fns.values() if f.api_name == "copy_link_attention")
    fields = app.bound["attention"].link.fields
    values = {"@picker": "default", "text": "The cat sat.", "layer": 2, "head": 1}
    inputs = ["**9 tokens**"] + [values.get(f.path[0]) for f in fields]
    answer = fn.fn(*inputs)
    assert answer["visible"] is True
    assert query_of(answer["value"]) == {"tab": "attention", "model": "default", "text": "The cat sat.",
                                         "layer": "2", "head": "1"}


# --- the picker's rules ---------------------------------------------------------------------------------

@pytest.fixture
def folders(tmp_path: Path, tiny_tokenizer) -> dict[str, Any]:
    """A saved model inside the allowed folder ``models``, and a default model."""
    models = tmp_path / "models"
    save_tiny_model(models / "saved", tiny_tokenizer)
    return dict(models=models, default=save_tiny_model(tmp_path / "default", tiny_tokenizer), root=tmp_path,
                tokenizer=tiny_tokenizer)


def services_for(folders: dict[str, Any], public: bool) -> Services:
    registry = ModelRegistry(runs_root=folders["root"] / "runs", allowed_dirs=(folders["models"],),
                             default_dir=folders["default"])
    return Services(tokenizer=folders["tokenizer"], models=registry,
                    access=AccessPolicy(public=public, admin_token="correct horse" if public else ""))


def test_a_local_folder_in_public_mode_gives_the_pickers_sentence_and_no_path(folders) -> None:
    services = services_for(folders, public=True)
    rules = PickerRules(services)
    for key in (str(folders["models"] / "saved"), f"local:{folders['models'] / 'saved'}", "local:models/saved",
                str(folders["models"] / "no-such-folder")):
        listed, sentence = rules.check(key)
        with pytest.raises(ValueError) as picker_says:
            services.model(key)
        assert sentence == str(picker_says.value) and "only the admin can load models from local folders" in sentence
        assert str(folders["root"]) not in sentence and listed == key
    assert rules.check("default") == ("default", None)
    assert rules.limits("default") == {"layer": 2, "head": 3, "position": services.max_length - 1}


def test_a_usable_key_comes_back_as_the_picker_lists_it_and_a_gone_checkpoint_says_so(folders) -> None:
    rules = PickerRules(services_for(folders, public=False))
    assert rules.check(str(folders["models"] / "saved")) == ("local:models/saved", None)     # never the server path
    key, sentence = rules.check("checkpoint:old-run/step-000010")
    assert "does not exist" in sentence and "Models available now: default" in sentence
    assert rules.limits("checkpoint:old-run/step-000010") == {"position": 511}            # the tab says the rest
