"""The standalone HTML files (explorer/views/standalone.py) in chromium with the network blocked: every request but
the file itself is aborted (``context.route("**/*")``), yet each view draws (non-blank canvas pixels and its
``data-drawn``), a layer, head, query or component change through the file's selects redraws from the data inside,
a click on a model-view tile moves the selects, and a view that would ask the server for data the file lacks says
so. No console errors, no request but the file's."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR
from explorer import notebook
from explorer.attention import canvas

TEXT = "The cat sat on the mat because it was tired."
VIEWPORT = {"width": 1200, "height": 900}
INKED = """(selector) => {
  const c = document.querySelector(selector), d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let inked = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) inked += 1;
  return { inked, width: c.width, height: c.height };
}"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three kinds of file from the bundled model, and an attention file holding one layer's maps only."""
    folder = tmp_path_factory.mktemp("standalone")
    model = notebook.load_model(DEFAULT_MODEL_DIR)
    made = {"attention": notebook.attention_view(model, TEXT, layer=3, head=4),
            "neuron": notebook.neuron_view(model, TEXT, layer=2, head=1, query=3),
            "embeddings": notebook.embeddings_view(model, TEXT, "It slept.", component="word")}
    with pytest.MonkeyPatch.context() as patch:                 # as a long input: the app sends one layer
        patch.setattr(canvas, "ALL_LAYERS_BUDGET", 0)
        made["one layer"] = notebook.attention_view(model, TEXT, layer=3, head=4)
    return {name: view.save(folder / f"{name.replace(' ', '-')}.html") for name, view in made.items()}


class Offline:
    """A page that opened ``path`` with every other request aborted; what it asked and what it logged."""

    def __init__(self, browser: Browser, path: Path) -> None:
        self.url, self.requests, self.errors = path.as_uri(), [], []
        self.context = browser.new_context(viewport=VIEWPORT)
        self.context.route("**/*", self._route)
        self.page: Page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(self.url)

    def _route(self, route) -> None:
        if route.request.url == self.url:
            route.continue_()
        else:
            self.requests.append(route.request.url)
            route.abort()

    def close(self) -> None:
        assert not self.errors, self.errors
        assert not self.requests, self.requests
        self.context.close()


@pytest.fixture
def opened(browser: Browser) -> Iterator:
    pages: list[Offline] = []

    def open_file(path: Path) -> Page:
        pages.append(Offline(browser, path))
        return pages[-1].page

    yield open_file
    for page in pages:
        page.close()


def inked(page: Page, selector: str) -> int:
    return page.evaluate(INKED, selector)["inked"]


def draws(page: Page, selector: str) -> int:
    return int(page.get_attribute(selector, "data-draws") or 0)


def test_the_attention_file_draws_offline_and_redraws_on_a_layer_change(opened, files) -> None:
    page = opened(files["attention"])
    heatmap, head_view, model_view = ".attn-heatmap", ".attn-head-view", ".attn-model-view"
    expect(page.locator(heatmap)).to_have_attribute("data-drawn", "L3-H4")
    expect(page.locator(head_view)).to_have_attribute("data-drawn", "L3-H4-0")
    expect(page.locator(model_view)).to_have_attribute("data-drawn", "L3-H4")
    for view in (heatmap, head_view, model_view):
        assert inked(page, f"{view} canvas") > 1000, view
    before = draws(page, heatmap)
    page.select_option("#attention-layer select", "5")
    expect(page.locator(heatmap)).to_have_attribute("data-drawn", "L5-H4")
    expect(page.locator(head_view)).to_have_attribute("data-drawn", "L5-H4-0")
    assert draws(page, heatmap) > before and "Layer 5, head 4" in page.inner_text(f"{heatmap} .attn-caption")
    page.select_option("#attention-head select", "11")
    expect(page.locator(model_view)).to_have_attribute("data-drawn", "L5-H11")
    box = page.locator(f"{heatmap} canvas").bounding_box()          # hover a cell: its weight
    page.mouse.move(box["x"] + box["width"] - 20, box["y"] + box["height"] - 20)
    expect(page.locator(f"{heatmap} .attn-tip.shown")).to_contain_text("weight")


def click_tile(page: Page, layer: int, head: int) -> None:
    """Click the model view's tile of (layer index, head)."""
    spot = page.evaluate("""([l, h]) => {
      const v = window.BertAttentionViews.views.find((x) => x.kind === "model_view"), g = v.geometry;
      const r = v.canvas.getBoundingClientRect();
      return { x: r.left + g.left + h * (g.tile + g.gap) + g.tile / 2, y: r.top + g.top + l * (g.tile + g.gap) + g.tile / 2 };
    }""", [layer, head])
    page.mouse.click(spot["x"], spot["y"])


def test_a_model_view_click_moves_the_selects(opened, files) -> None:
    page = opened(files["attention"])
    expect(page.locator(".attn-model-view")).to_have_attribute("data-drawn", "L3-H4")
    page.locator(".attn-model-view canvas").scroll_into_view_if_needed()
    click_tile(page, 1, 7)
    expect(page.locator(".attn-heatmap")).to_have_attribute("data-drawn", "L2-H7")
    assert page.input_value("#attention-layer select") == "2" and page.input_value("#attention-head select") == "7"


def test_a_file_with_one_layer_offers_it_and_says_what_the_app_would_fetch(opened, files) -> None:
    page = opened(files["one layer"])
    expect(page.locator(".attn-heatmap")).to_have_attribute("data-drawn", "L3-H4")
    assert page.eval_on_selector_all("#attention-layer option", "os => os.map((o) => o.value)") == ["3"]
    assert "only" in page.inner_text(".sa-held >> nth=1")
    page.locator(".attn-model-view canvas").scroll_into_view_if_needed()
    click_tile(page, 0, 0)                                       # a layer the file lacks: no request, a sentence
    expect(page.locator(".sa-status")).to_contain_text("needs data this file does not hold")
    expect(page.locator(".attn-heatmap .attn-caption")).to_contain_text("Layer 1, head 0")


def test_the_neuron_file_draws_offline_and_follows_its_selects(opened, files) -> None:
    page = opened(files["neuron"])
    view = ".neuron-view"
    expect(page.locator(view)).to_have_attribute("data-drawn", "L2-H1-Q3-0")   # the value's query
    assert inked(page, f"{view} canvas") > 1000
    page.select_option("#attention-head select", "5")
    expect(page.locator(view)).to_have_attribute("data-drawn", "L2-H5-Q3-0")
    page.select_option("#attention-layer select", "6")
    expect(page.locator(view)).to_have_attribute("data-drawn", "L6-H5-Q3-0")
    page.focus("#neuron-query select")                          # the keyboard picks another query token
    page.keyboard.press("ArrowDown")
    expect(page.locator(view)).to_have_attribute("data-drawn", "L6-H5-Q4-0")


def test_the_embeddings_file_draws_offline_and_follows_its_component(opened, files) -> None:
    page = opened(files["embeddings"])
    dimensions, similarity = ".emb-dimensions", ".emb-similarity"
    expect(page.locator(dimensions)).to_have_attribute("data-drawn", "word")
    expect(page.locator(similarity)).to_have_attribute("data-drawn", "cosine")
    assert inked(page, f"{dimensions} canvas") > 1000 and inked(page, f"{similarity} canvas") > 1000
    page.select_option("#embeddings-component select", "segment")
    expect(page.locator(dimensions)).to_have_attribute("data-drawn", "segment")
    assert "segment" in page.inner_text(f"{dimensions} .emb-caption").lower()


def download_from_app(page: Page, panel, button: str, folder: Path) -> Path:
    """Click ``button`` in the tab ``panel`` and save the file its answer links."""
    panel.get_by_role("button", name=button).click()
    row = panel.locator("tr").filter(has_text=".html").first       # the gr.File's row: name, size and link
    expect(row).to_be_visible()
    link = row.locator("a").first
    with page.expect_download() as caught:
        link.click()
    path = folder / caught.value.suggested_filename
    caught.value.save_as(path)
    return path


def test_the_apps_buttons_download_the_answer_the_page_shows(desktop: Page, browser: Browser, opened,
                                                             tmp_path: Path) -> None:
    from support.browser_helpers import no_error_toast, open_tab, run_first_example

    panel = open_tab(desktop, "Attention")
    panel.get_by_role("button", name="Download the views as HTML").click()      # before any answer: a sentence
    expect(desktop.get_by_text("Nothing to download yet: press Show attention first")).to_be_visible()
    run_first_example(panel)                                     # "The cat sat on the mat because it was tired."
    expect(panel.locator(".attn-heatmap")).to_have_attribute("data-drawn", "L1-H0")
    page_moved = panel.locator("#attention-head input[type=number]")           # the page's head, moved here
    page_moved.fill("5")
    page_moved.press("Enter")
    expect(panel.locator(".attn-heatmap")).to_have_attribute("data-drawn", "L1-H5")
    saved = download_from_app(desktop, panel, "Download the views as HTML", tmp_path)
    assert saved.name == "attention-default-The-cat-sat-on-the-mat-because-it-was-ti.html"   # 40 characters
    offline = opened(saved)
    expect(offline.locator(".attn-heatmap")).to_have_attribute("data-drawn", "L1-H5")
    offline.select_option("#attention-layer select", "4")
    expect(offline.locator(".attn-heatmap")).to_have_attribute("data-drawn", "L4-H5")

    panel = open_tab(desktop, "Embeddings")
    run_first_example(panel)
    expect(panel.locator(".emb-dimensions")).to_have_attribute("data-drawn", "output")
    saved = download_from_app(desktop, panel, "Download the maps as HTML", tmp_path)
    assert saved.name.startswith("embeddings-default-Who-was-Jim-Henson") and saved.suffix == ".html"
    offline = opened(saved)
    expect(offline.locator(".emb-dimensions")).to_have_attribute("data-drawn", "output")
    expect(offline.locator(".emb-similarity")).to_have_attribute("data-drawn", "cosine")
    no_error_toast(desktop)
