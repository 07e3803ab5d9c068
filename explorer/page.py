"""The page: ``build_app(services)`` assembles the header, the model picker and one tab per task, each with its
*Copy link* row (``explorer.serving.links``: a link that reopens the view, and embed mode).

Theme and CSS are exported separately because Gradio 6 takes them in ``launch()``,
not in ``gr.Blocks()``: ``build_app().launch(theme=THEME, css=CSS)``. The page script (:data:`JS`, read from
``assets/page.js``: Ctrl+Enter runs a tab's main action, a glossary word opens the Glossary tab, *Copy link* writes
the clipboard, a link presses its tab's button, ``?embed=1`` hides the page's chrome) is part of the
app itself, a js-only load event, so it runs however the app is launched.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from explorer.models import picker as model_picker

from explorer.serving import sessions as sessions
from explorer.serving.links import wiring as links
from explorer.serving.links.embed import LINK_CSS, mark_extras
from explorer.glossary import gloss
from explorer.services import Services, default_services
from explorer.tab_registry import TABS
from explorer.ui_errors import check_number_inputs
from explorer.views import plot_export

__all__ = ["build_app", "THEME", "CSS", "JS", "TITLE", "DESCRIPTION", "HEADER_HELP"]

TITLE = "BERT Explorer"
DESCRIPTION = (
    "See how BERT reads text: tokenize it, look inside the embeddings and attention heads, "
    "pretrain a small BERT and probe it as it learns."
)

# Under the description: where the words are explained (the dotted words are glossary.gloss links).
HEADER_HELP = ("Words explained: the **Glossary** tab (the last); hover a dotted word such as {example} to read it, "
               "click it to open its entry. Ctrl+Enter in a text box runs its tab.")

# Built-in theme with system fonts only: nothing is fetched from a font CDN.
THEME = gr.themes.Soft(
    primary_hue="indigo",
    font=["ui-sans-serif", "system-ui", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
)

_ASSETS = Path(__file__).resolve().parent.parent / "assets"      # next to explorer/, in a checkout and a wheel
PAGE_JS_MAX_BYTES = 64 * 1024      # our own script is ~5 KB; anything far larger is not it


def read_asset(path: Path, max_bytes: int) -> str:
    """The UTF-8 text of the bundled asset ``path``; ValueError if it is over ``max_bytes`` bytes (read no
    further), FileNotFoundError if it is missing."""
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{path.name} is over {max_bytes:,} bytes: not the app's own asset")
    return data.decode("utf-8")


_CSS_PATH = _ASSETS / "style.css"
# The page's CSS, then embed mode's and the Copy link row's (explorer/serving/links/embed.py).
CSS: str = (_CSS_PATH.read_text(encoding="utf-8") if _CSS_PATH.is_file() else "") + LINK_CSS

# The class of a component whose Enter is Gradio's own (it has a submit event): ``mark_submit_fields``, read by JS.
SUBMIT_CLASS = "has-submit"

# The page script, run once when the page loads (a js-only load event in ``build_app``, so it runs however the
# app is launched): ``assets/page.js``, package data like style.css, read once with a size cap.
JS: str = read_asset(_ASSETS / "page.js", PAGE_JS_MAX_BYTES)


def build_app(services: Services | None = None) -> gr.Blocks:
    """Build the whole app (no launch): the model picker, then one ``gr.Tab`` per row of
    ``explorer.tab_registry.TABS``. Loads the bundled tokenizer if ``services`` is None."""
    services = services if services is not None else default_services()
    # delete_cache: every 30 min, Gradio drops served files (uploads, exports) older than an hour.
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=(1800, 3600)) as demo:
        with gr.Column(elem_id="app-header"):
            gr.Markdown(f"# {TITLE}\n{DESCRIPTION}\n\n{HEADER_HELP.format(example=gloss('WordPiece'))}")
        picker = model_picker.build(services)
        built: dict[str, dict] = {}                     # each tab's widgets by name, by tab id
        rows: dict[str, links.CopyRow] = {}             # each tab's Copy link row (explorer/serving/links)
        with gr.Tabs(elem_id="main-tabs") as tabs:
            for tab in TABS:
                with gr.Tab(tab.title, id=tab.id):
                    rows[tab.id] = links.copy_row(tab.id)
                    built[tab.id] = tab.build(services, picker) or {}
        for tab in TABS:                                # links between tabs (a module's optional ``link``)
            if hasattr(tab.module, "link"):
                tab.module.link(built, tabs)
        # A link's tab, model and fields first (explorer/serving/links), then the picker's page load, then the
        # link's button: the picker keeps the link's model and the tabs fit their sliders to it, not over it.
        opening = links.install(demo, tabs, rows, built, picker.dropdown, services)
        links.press_after(model_picker.wire_page_load(demo, services, picker, after=opening.event), opening)
        demo.load(None, js=JS, api_visibility="private")    # the page script; no request to the server
        plot_export.install(demo)                           # every Plotly chart: SVG, PNG 2x, PNG 3x
        sessions.install(demo, services)                    # a closed page gives back its kept forwards
        # The reference for bench/ui_latency.py: the same queue and HTTP route as every endpoint, no work.
        gr.api(noop, api_name="noop", api_visibility="undocumented")
    check_number_inputs(demo)          # "Layer must be a whole number, got 'abc'.", not Gradio's empty error
    wrap_tabs(demo)
    mark_extras(demo)                  # examples and accordions: embed mode (?embed=1) hides them
    mark_submit_fields(demo)
    return demo


def wrap_tabs(demo: gr.Blocks) -> None:
    """Every ``gr.Tabs`` of ``demo`` (the app's and a tab's inner ones, as in Heads) wraps its tab titles onto more
    rows where they do not fit; Gradio's default hides them behind a "•••" menu (at phone width, 8 of 10)."""
    for block in demo.blocks.values():
        if isinstance(block, gr.Tabs):
            block.overflow_behavior = "wrap"


def mark_submit_fields(demo: gr.Blocks) -> None:
    """Give every component with a ``submit`` event (Enter in it runs something) the class ``SUBMIT_CLASS``: the
    page script (:data:`JS`) leaves Enter in those to Gradio and runs the main button on Enter in the others.
    (The page has no other way to tell: a component's element carries no id of its own.)"""
    for fn in demo.fns.values():
        for block_id, event in fn.targets:
            block = demo.blocks.get(block_id)
            if event != "submit" or block is None:
                continue
            classes = block.elem_classes
            classes = [classes] if isinstance(classes, str) else list(classes or [])
            if SUBMIT_CLASS not in classes:
                block.elem_classes = [*classes, SUBMIT_CLASS]


def noop(text: str = "") -> str:
    """Answer the input as it came (the cost of a request with no work in it)."""
    return text
