"""BERT Explorer's Gradio UI: ``build_app(services)`` assembles one tab per task.

Theme and CSS are exported separately because Gradio 6 takes them in ``launch()``,
not in ``gr.Blocks()``: ``build_app().launch(theme=THEME, css=CSS)``.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from explorer.services import Services, default_services
from explorer.ui_errors import check_number_inputs

__all__ = ["build_app", "Services", "default_services", "THEME", "CSS", "TITLE", "DESCRIPTION"]

TITLE = "BERT Explorer"
DESCRIPTION = (
    "See how BERT reads text: tokenize it, look inside the embeddings and attention heads, "
    "pretrain a small BERT and probe it as it learns."
)

# Built-in theme with system fonts only: nothing is fetched from a font CDN.
THEME = gr.themes.Soft(
    primary_hue="indigo",
    font=["ui-sans-serif", "system-ui", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
)

_CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "style.css"
CSS: str = _CSS_PATH.read_text(encoding="utf-8") if _CSS_PATH.is_file() else ""


def build_app(services: Services | None = None) -> gr.Blocks:
    """Build the whole app (no launch): the model picker, then one ``gr.Tab`` per row of
    ``explorer.tab_registry.TABS``. Loads the bundled tokenizer if ``services`` is None."""
    from explorer import model_picker
    from explorer.tab_registry import TABS

    services = services if services is not None else default_services()
    # delete_cache: every 30 min, Gradio drops served files (uploads, exports) older than an hour.
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=(1800, 3600)) as demo:
        with gr.Column(elem_id="app-header"):
            gr.Markdown(f"# {TITLE}\n{DESCRIPTION}")
        picker = model_picker.build(services)
        with gr.Tabs():
            for tab in TABS:
                with gr.Tab(tab.title, id=tab.id):
                    tab.build(services, picker)
        model_picker.wire_page_load(demo, services, picker)
        # The reference for bench/ui_latency.py: the same queue and HTTP route as every endpoint, no work.
        gr.api(noop, api_name="noop", api_visibility="undocumented")
    check_number_inputs(demo)          # "Layer must be a whole number, got 'abc'.", not Gradio's empty error
    return demo


def noop(text: str = "") -> str:
    """Answer the input as it came (the cost of a request with no work in it)."""
    return text
