"""BERT Explorer's Gradio UI: ``build_app(services)`` assembles one tab per task.

Theme and CSS are exported separately because Gradio 6 takes them in ``launch()``,
not in ``gr.Blocks()``: ``build_app().launch(theme=THEME, css=CSS)``. The page script (:data:`JS`:
Ctrl+Enter runs a tab's main action, a glossary word opens the Glossary tab) is part of the app itself, a
js-only load event, so it runs however the app is launched.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from explorer.services import Services, default_services
from explorer.ui_errors import check_number_inputs

__all__ = ["build_app", "Services", "default_services", "THEME", "CSS", "JS", "TITLE", "DESCRIPTION", "HEADER_HELP"]

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

_CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "style.css"
CSS: str = _CSS_PATH.read_text(encoding="utf-8") if _CSS_PATH.is_file() else ""

# The class of a component whose Enter is Gradio's own (it has a submit event): ``mark_submit_fields``, read by JS.
SUBMIT_CLASS = "has-submit"

# The page script, run once when the page loads (a js-only load event in ``build_app``, so it runs however the
# app is launched). Kept here, not in assets/, so the wheel needs no new package-data pattern.
JS: str = r"""() => {
  /* 1. Ctrl+Enter (Cmd+Enter on a Mac) in any field clicks its main button: a usable button.main-action in the
        field's section (its accordion, else its tab panel), else the nearest button: searching outward from the
        field (its block, form, row, column, accordion, ...) up to its tab panel, the first container holding a
        usable primary or secondary button (never a "stop" one), there its first primary, else its first. Plain
        Enter in a one-line text box does the same when it has no submit event (class has-submit), except for
        the buttons that start or change a training run (those are pressed on purpose).
     2. A click on a glossary word (.gloss, explorer/glossary.py) opens the Glossary tab at its entry. */
  if (window.__bertExplorerScript) return [];
  window.__bertExplorerScript = true;

  const GLOSSARY_TAB = "Glossary";
  const NO_PLAIN_ENTER = /^\s*(start|continue run|pause|resume|stop|save checkpoint now)\s*$/i;
  const usable = (el) => el.getClientRects().length > 0 && !el.disabled;

  function mainButton(field) {
    const limit = field.closest("[role=tabpanel]") || document.body;
    const sectionOf = (el) => el.closest(".gr-accordion, [role=tabpanel]") || document.body;
    const section = sectionOf(field);
    const marked = [...section.querySelectorAll("button.main-action")]
      .find((b) => usable(b) && sectionOf(b) === section);
    if (marked) return marked;
    for (let node = field.parentElement; node; node = node.parentElement) {
      const buttons = [...node.querySelectorAll("button.primary, button.secondary")].filter(usable);
      if (buttons.length) {
        return buttons.find((b) => b.classList.contains("primary")) || buttons[0];
      }
      if (node === limit) return null;
    }
    return null;
  }

  function hasSubmit(field) {        // build_app marks the components with a submit event (mark_submit_fields)
    const block = field.closest(".block");
    return !block || block.classList.contains("has-submit");
  }

  function oneLineText(field) {      // not a number box: Enter there is Gradio's (a slider's redraw, a submit)
    if (field.tagName === "INPUT") return ["text", "search"].includes(field.type);
    return field.tagName === "TEXTAREA" && Number(field.rows) === 1;
  }

  document.addEventListener("keydown", (event) => {
    const field = event.target;
    if (event.key !== "Enter" || event.isComposing || event.altKey || !(field instanceof HTMLElement)) return;
    if (!field.matches("textarea, input")) return;
    const chord = event.ctrlKey || event.metaKey;
    if (!chord && (event.shiftKey || !oneLineText(field) || hasSubmit(field))) return;
    const button = mainButton(field);
    if (!button || (!chord && NO_PLAIN_ENTER.test(button.textContent || ""))) return;
    event.preventDefault();             // no newline, and no keypress: a one-line box's own submit stays quiet
    if (chord) event.stopPropagation();     // Gradio reads a one-line box's Enter, Ctrl or not, as its submit
    setTimeout(() => button.click(), 0);
  }, true);

  function glossaryTab() {
    const named = (b) => (b.textContent || "").trim() === GLOSSARY_TAB;
    return [...document.querySelectorAll("[role=tab]")].find(named)
      || [...document.querySelectorAll(".overflow-dropdown button")].find(named);
  }

  function showEntry(anchor, tries) {
    const target = anchor && document.getElementById(anchor);
    if (target && target.getClientRects().length > 0) {
      const row = target.closest("p") || target;
      row.scrollIntoView({ block: "center" });
      row.classList.add("gloss-target");
      setTimeout(() => row.classList.remove("gloss-target"), 2500);
    } else if (tries > 0) {
      setTimeout(() => showEntry(anchor, tries - 1), 100);
    }
  }

  function openEntry(event) {
    const word = event.target instanceof Element && event.target.closest(".gloss");
    if (!word || (event.type === "keydown" && event.key !== "Enter" && event.key !== " ")) return;
    const tab = glossaryTab();
    if (!tab) return;
    event.preventDefault();
    tab.click();
    const anchor = word.getAttribute("data-gloss")      // Markdown drops data- attributes: then the class
      || [...word.classList].find((name) => name.startsWith("gloss-") && name !== "gloss-target");
    showEntry(anchor, 40);
  }
  document.addEventListener("click", openEntry, true);
  document.addEventListener("keydown", openEntry, true);
  // The sanitizer drops tabindex too: glossary words become focusable (Tab, then Enter) as they appear.
  const focusable = () => document.querySelectorAll(".gloss:not([tabindex])").forEach((w) => {
    w.setAttribute("tabindex", "0");
    w.setAttribute("role", "button");
  });
  focusable();
  new MutationObserver(focusable).observe(document.body, { subtree: true, childList: true });
  return [];
}
"""


def build_app(services: Services | None = None) -> gr.Blocks:
    """Build the whole app (no launch): the model picker, then one ``gr.Tab`` per row of
    ``explorer.tab_registry.TABS``. Loads the bundled tokenizer if ``services`` is None."""
    from explorer import model_picker
    from explorer.glossary import gloss
    from explorer.tab_registry import TABS

    services = services if services is not None else default_services()
    # delete_cache: every 30 min, Gradio drops served files (uploads, exports) older than an hour.
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=(1800, 3600)) as demo:
        with gr.Column(elem_id="app-header"):
            gr.Markdown(f"# {TITLE}\n{DESCRIPTION}\n\n{HEADER_HELP.format(example=gloss('WordPiece'))}")
        picker = model_picker.build(services)
        with gr.Tabs(elem_id="main-tabs"):
            for tab in TABS:
                with gr.Tab(tab.title, id=tab.id):
                    tab.build(services, picker)
        model_picker.wire_page_load(demo, services, picker)
        demo.load(None, js=JS, api_visibility="private")    # the page script; no request to the server
        # The reference for bench/ui_latency.py: the same queue and HTTP route as every endpoint, no work.
        gr.api(noop, api_name="noop", api_visibility="undocumented")
    check_number_inputs(demo)          # "Layer must be a whole number, got 'abc'.", not Gradio's empty error
    wrap_tabs(demo)
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
