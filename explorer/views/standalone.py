"""One canvas view (or a tab's views together) as a standalone HTML file: one self-contained document that draws
in any browser, offline, from the same value dicts and the same scripts as the app (docs/design/browser-views.md).

The document inlines the arrays' decoder, the drawing tools and the views' scripts (read from ``assets/`` when
the document is made), the views' block of ``assets/style.css`` with the few CSS variables they read (light
theme), each view's value as JSON, and a tiny host that plays Gradio's part: it hands each view ``props`` (its
value), ``watch`` and ``trigger`` and calls the view's ``mount`` as ``js_on_load`` would. Plain ``<select>``s
stand in for the tab's widgets: each writes the hidden input the views' scripts already read (the layer and
head sliders' number boxes, the component radio), so a change redraws from the data inside the file, with no
request. A view that asks the server for data the file lacks (``trigger``) gets a line saying so instead.

No network: no URL is written (the scripts hold none), and ``<`` in the JSON is escaped, so a token such as
``</script>`` cannot end its script early. No Gradio here.
"""
from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from explorer.views.browser_arrays import SCRIPT as ARRAYS_SCRIPT
from explorer.views.canvas_view import SVG, TOOLS

ASSETS = Path(__file__).resolve().parents[2] / "assets"
STYLE = ASSETS / "style.css"
VIEW_CLASSES = (".attn-", ".neuron-", ".emb-")          # a style block that styles one of these is the views'
BLOCK_START = re.compile(r"^/\* --- (?!end of)(.*?)--- \*/\s*$", re.MULTILINE)
BLOCK_END = re.compile(r"^/\* --- end of .*?--- \*/\s*$", re.MULTILINE)
# The page's CSS variables the views read (Gradio's light theme: its Soft theme's values, rounded).
LIGHT_THEME = """:root { color-scheme: light; --body-text-color: #1f2937; --body-text-color-subdued: #6b7280;
  --background-fill-primary: #ffffff; --border-color-primary: #e5e7eb; --color-accent: #2563eb; }"""
PAGE_STYLE = """body { margin: 16px; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--body-text-color); background: var(--background-fill-primary); }
h1 { font-size: 18px; margin: 0 0 4px; }
.sa-about, .sa-held, .sa-status { margin: 2px 0; font-size: 13px; color: var(--body-text-color-subdued); }
.sa-status:empty { display: none; }
.sa-controls { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; margin: 10px 0; font-size: 14px; }
.sa-controls select { margin-left: 4px; font-size: 14px; }
.sa-panel { margin: 14px 0 22px; }
.sa-panel h2 { font-size: 15px; margin: 0 0 6px; }"""


@dataclass(frozen=True)
class Panel:
    """One view in the document: its heading, its static template (the ``gr.HTML``'s), its value and the mount
    call its ``js_on_load`` ends with (``element``, ``props``, ``trigger`` and ``watch`` in scope)."""

    label: str
    template: str
    value: dict[str, Any]
    mount: str


@dataclass(frozen=True)
class Control:
    """A ``<select>`` standing in for one of the tab's widgets: inside the element ``element_id`` (the id the
    views' scripts read), it writes a hidden ``<input type=number>`` (``mirror="number"``, as a slider's box) or
    checks one of hidden radios (``mirror="radio"``, as a ``gr.Radio``)."""

    element_id: str
    label: str
    options: Sequence[tuple[str, str]]          # (shown, value)
    value: str
    mirror: Literal["number", "radio"] = "number"
    name: str = ""                              # the radios' name (defaults to element_id)

    def markup(self) -> str:
        """The control's HTML: a label holding the select, and the hidden inputs the scripts read."""
        if self.value not in [v for _, v in self.options]:
            raise ValueError(f"{self.label}: {self.value!r} is not one of its options")
        options = "".join(f'<option value="{_attr(v)}"{" selected" if v == self.value else ""}>{html.escape(shown)}'
                          "</option>" for shown, v in self.options)
        if self.mirror == "number":
            hidden = f'<input type="number" hidden value="{_attr(self.value)}">'
        else:
            name = _attr(self.name or self.element_id)
            hidden = "".join(f'<input type="radio" hidden name="{name}" value="{_attr(v)}"'
                             f'{" checked" if v == self.value else ""}>' for _, v in self.options)
        return (f'<label class="sa-control" id="{_attr(self.element_id)}" data-mirror="{self.mirror}">'
                f'{html.escape(self.label)} <select>{options}</select>{hidden}</label>')


HOST = """(() => {
  /* The standalone file's host (explorer/views/standalone.py): Gradio's part for each view. */
  const status = document.querySelector(".sa-status");
  document.querySelectorAll("[data-mirror]").forEach((box) => {   // a select writes what the views read
    const select = box.querySelector("select");
    const write = () => {
      if (box.dataset.mirror === "number") box.querySelector("input").value = select.value;
      else box.querySelectorAll("input[type=radio]").forEach((r) => { r.checked = r.value === select.value; });
      status.textContent = "";
    };
    select.addEventListener("input", write);    // runs before the views' listeners on the document
    select.addEventListener("change", write);
  });
  document.addEventListener("input", (ev) => {   // a view set a box itself (a click on a model-view tile)
    const box = ev.target instanceof Element && ev.target.tagName === "INPUT" && ev.target.closest("[data-mirror]");
    if (!box) return;
    const select = box.querySelector("select");
    if ([...select.options].some((o) => o.value === ev.target.value)) select.value = ev.target.value;
  }, true);
  const values = JSON.parse(document.getElementById("sa-values").textContent);
  window.BertStandalone.mounts.forEach((mount, i) => {
    const element = document.getElementById(`sa-view-${i}`);
    const props = { value: values[i] };
    const trigger = (name) => {                 // the app would ask its server: the file has no server
      element.dataset.asked = name;
      status.textContent = "That needs data this file does not hold (the app computes it on request): "
        + "pick one of the layers, heads or components offered above.";
    };
    mount(element, props, trigger, () => {});   // a file's values never change: nothing to watch
  });
})();"""


def view_css(css: str | None = None) -> str:
    """The canvas views' rules of ``assets/style.css`` (``css``: its text, read when None): every marked block
    (``/* --- name --- */`` … ``/* --- end of … --- */``) that styles ``.attn-``, ``.neuron-`` or ``.emb-``."""
    css = STYLE.read_text(encoding="utf-8") if css is None else css
    blocks = []
    for start in BLOCK_START.finditer(css):
        end = BLOCK_END.search(css, start.end())
        block = css[start.start(): end.end() if end else len(css)]
        if any(name in block for name in VIEW_CLASSES):
            blocks.append(block.strip())
    return "\n".join(blocks)


def json_for_script(value: Any) -> str:
    """``value`` as JSON that is safe inside ``<script>``: ``<``, ``>`` and ``&`` written as ``\\u003c`` … (the
    same string once parsed), so no token can close the script or open a comment."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def inline_script(source: str) -> str:
    """A script's text for an inline ``<script>``: ``</script`` written ``<\\/script`` (the same JavaScript)."""
    return re.sub(r"</(script)", r"<\\/\1", source, flags=re.IGNORECASE)


def standalone_html(title: str, panels: Sequence[Panel], scripts: Sequence[Path], controls: Sequence[Control] = (),
                    lines: Sequence[str] = ()) -> str:
    """One complete HTML document: ``title``, ``lines`` of text under it (what the file holds), the
    ``controls`` and the ``panels``, drawn by the decoder, the drawing tools and ``scripts`` (the views' own,
    read now, in order) with every value inside the file."""
    if not panels:
        raise ValueError("a standalone document needs at least one view")
    sources = [ARRAYS_SCRIPT, SVG, TOOLS, *scripts]     # the SVG context before the tools: SVG export too
    code = "\n".join(f"<script>\n{inline_script(Path(p).read_text(encoding='utf-8'))}\n</script>" for p in sources)
    mounts = ",\n".join(f"  function (element, props, trigger, watch) {{ {inline_script(p.mount)} }}" for p in panels)
    views = "\n".join(f'<section class="sa-panel"><h2>{html.escape(p.label)}</h2>'
                      f'<div id="sa-view-{i}" class="sa-view">{p.template}</div></section>'
                      for i, p in enumerate(panels))
    about = "\n".join(f'<p class="sa-held">{html.escape(line)}</p>' for line in lines)
    bar = f'<div class="sa-controls">{"".join(c.markup() for c in controls)}</div>' if controls else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>
{LIGHT_THEME}
{PAGE_STYLE}
{view_css()}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="sa-about">Made by BERT Explorer: a standalone file, drawn in this browser from the data inside it
(no network). Hover the drawings for numbers.</p>
{about}
{bar}
<p class="sa-status" role="status"></p>
{views}
<script type="application/json" id="sa-values">{json_for_script([p.value for p in panels])}</script>
{code}
<script>
window.BertStandalone = {{ mounts: [
{mounts}
] }};
</script>
<script>
{HOST}
</script>
</body>
</html>
"""


def _attr(text: str) -> str:
    return html.escape(str(text), quote=True)
