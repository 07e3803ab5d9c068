"""The Attention tab's neuron view on canvas in a real chromium, in the light and the dark theme and at phone width
(390 px): *Show the neuron view* draws q, every k, q ⊙ k, the scores and the softmax; a click on a token makes it
the query and a typed head redraws, both with **no network request** (a short input's page holds every head);
hovering shows the engine's numbers to the float16 encoding's precision; a long input shows a window of key
tokens the user slides, and a head the page lacks is asked for once; *PNG* saves what is drawn. At real size (a
bert-large shape, 512 tokens) a layer change with the view open is one request of at most 300 KB, and a query
picked in the dropdown, by mouse or keyboard, asks nothing."""
from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import Page, expect

from engine.probes.attention.neuron_view import neuron_view
from explorer.attention.sections import EXAMPLES
from support.browser_helpers import (ARTIFACTS, LARGE, choose_option, no_error_toast, open_tab, pin_large_model,
                                     run_first_example)

HALF = 2.0 ** -11                               # float16's relative rounding
LONG_TEXT = " ".join(["The cat sat on the mat because it was tired, and the dog watched it from the door."] * 14)


def type_number(panel, elem_id: str, value: int) -> None:
    box = panel.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def joined(page: Page, requests: list[str]) -> list[str]:
    """The events the page called (queue joins) but the timers' polls (every 5 s, the model picker's list)."""
    import json

    config = page.evaluate("() => window.gradio_config")
    ticks = {d["id"] for d in config["dependencies"] if d["targets"] and all(t[1] == "tick" for t in d["targets"])}
    names = {d["id"]: d.get("api_name") for d in config["dependencies"]}
    joins = [json.loads(r.split(" ", 1)[1])["fn_index"] for r in requests if "/queue/join" in r]
    return [names.get(fn) for fn in joins if fn not in ticks]


def shown(page: Page, panel):
    """Open the accordion, press *Show the neuron view*; the view's root."""
    panel.get_by_text("Neuron view: the numbers behind one row of the heatmap").click()
    panel.get_by_role("button", name="Show the neuron view").click()
    root = panel.locator(".neuron-canvas-view .neuron-view").first
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q0-0")
    return root


def geometry(page: Page) -> dict:
    return page.evaluate("() => window.BertNeuronView.views[0].geometry")


def click_token(page: Page, root, key: int) -> None:
    """Click key token ``key``'s label (it must be inside the window)."""
    g = geometry(page)
    root.locator("canvas").scroll_into_view_if_needed()
    box = root.locator("canvas").bounding_box()
    page.mouse.click(box["x"] + g["labelW"] / 2, box["y"] + g["top"] + (key - g["start"] + 0.5) * g["rowH"])


def hover(page: Page, root, part: str, key: int, dim: int = 0) -> dict[str, str]:
    """Hover ``part`` ("k", "product", "score", "weight") of key ``key``'s row; the tooltip's data."""
    g = geometry(page)
    x = {"k": g["xK"] + (dim + 0.5) * g["cell"], "product": g["xP"] + (dim + 0.5) * g["cell"],
         "score": g["xS"] + g["scoreW"] / 2, "weight": g["xW"] + 4}[part]
    root.locator("canvas").scroll_into_view_if_needed()
    scroll = root.locator(".neuron-scroll")
    scroll.evaluate(f"e => {{ e.scrollLeft = {max(0, x - 150)}; }}")
    box = root.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + x, box["y"] + g["top"] + (key - g["start"] + 0.5) * g["rowH"])
    tip = root.locator(".neuron-tip")
    expect(tip).to_have_class("neuron-tip shown")
    data = tip.evaluate("e => ({...e.dataset})")
    assert data["part"] == part and int(data["key"]) == key, data
    return data


def check_row(page: Page, model, root, text: str, pair: str | None, length: int, layer: int, head: int,
              query: int, keys: tuple[int, ...]) -> None:
    """Hovered k, q ⊙ k, scores and weights equal the engine's to float16's precision."""
    view = neuron_view(model, text, pair, layer, head, query, length)
    big = float(np.abs(view.query_vector).max()) * float(np.abs(view.key_vectors).max())
    score_error = float((np.abs(view.query_vector) @ np.abs(view.key_vectors).T).max()) / math.sqrt(
        view.head_size) * 2.02 * HALF + 1e-5
    for key in keys:
        k = float(hover(page, root, "k", key, 3)["value"])
        assert abs(k - view.key_vectors[key, 3]) <= abs(view.key_vectors[key, 3]) * HALF + 1e-6
        p = float(hover(page, root, "product", key, 3)["value"])
        assert abs(p - view.products[key, 3]) <= big * 2.02 * HALF + 1e-6
        assert abs(float(hover(page, root, "score", key)["value"]) - view.scores[key]) <= score_error
        assert abs(float(hover(page, root, "weight", key)["value"]) - view.weights[key]) <= math.expm1(2 * score_error)


def test_a_click_picks_the_query_a_head_change_redraws_and_hover_shows_the_engines_numbers(
        page: Page, default_model) -> None:
    panel = open_tab(page, "Attention")
    run_first_example(panel)                                  # "The cat sat on the mat because it was tired."
    text, pair = EXAMPLES[0]
    root = shown(page, panel)
    expect(root.locator(".neuron-caption")).to_contain_text("Layer 1, head 0, query 0 [CLS]")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(f"{request.url} {request.post_data}"))
    click_token(page, root, 3)                                # "sat": the query, drawn here
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q3-0")
    expect(root.locator(".neuron-caption")).to_contain_text("query 3 sat")
    check_row(page, default_model, root, text, pair or None, 128, 0, 0, 3, (0, 3, 7))
    type_number(panel, "attention-layer", 2)                  # a head the page holds: drawn here
    type_number(panel, "attention-head", 5)
    expect(root).to_have_attribute("data-drawn", "L2-H5-Q3-0")
    check_row(page, default_model, root, text, pair or None, 128, 1, 5, 3, (1, 4))
    root.locator("canvas").focus()
    page.keyboard.press("ArrowDown")                          # the arrow keys move the query
    expect(root).to_have_attribute("data-drawn", "L2-H5-Q4-0")
    page.wait_for_timeout(500)
    assert joined(page, requests) == [], requests
    no_error_toast(page)

    caption = root.locator(".neuron-caption")                 # the words read on the page in either theme
    colour = caption.evaluate("e => getComputedStyle(e).color")
    bright = sum(int(c) for c in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3]) / 3
    assert (bright > 150) if page.look == "dark" else (bright < 120), (page.look, colour)   # type: ignore[attr-defined]
    canvas = root.locator("canvas").bounding_box()
    assert canvas["x"] + canvas["width"] <= page.viewport_size["width"] + 1, (page.look, canvas)  # type: ignore
    hover(page, root, "product", 3, 3)                        # the tooltip in the picture
    root.screenshot(path=str(ARTIFACTS / f"neuron-canvas-{page.look}.png"))  # type: ignore[attr-defined]


def test_a_long_input_windows_the_keys_and_asks_once_for_a_head_it_lacks(desktop: Page, default_model) -> None:
    """At 256 tokens the default model's vectors (6 x 12 heads) exceed what one answer sends: the chosen head's
    come; sliding the window and picking a query stay in the browser, another head is asked for once
    (``neuron_view_refresh``) and a head the page then holds is not asked again. *PNG* saves the drawing."""
    page = desktop
    panel = open_tab(page, "Attention")
    panel.get_by_label("Text", exact=True).fill(LONG_TEXT)
    length = panel.get_by_label("Max length", exact=False).first.locator(
        "xpath=ancestor::div[contains(@class,'block')][1]").locator("input[type=number]")
    length.fill("256")
    length.press("Enter")
    root = shown(page, panel)
    expect(root.locator(".neuron-controls")).to_contain_text("key tokens 0–39 of 256")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(f"{request.url} {request.post_data}"))
    root.locator("input.neuron-window").fill("100")           # slide the window: drawn here
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q0-100")
    click_token(page, root, 120)
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q120-100")
    page.wait_for_timeout(500)
    assert joined(page, requests) == [], requests
    type_number(panel, "attention-head", 4)                   # not held: asked for once, this head alone
    expect(root).to_have_attribute("data-drawn", "L1-H4-Q120-100")
    assert joined(page, requests).count("neuron_view_refresh") == 1, joined(page, requests)
    check_row(page, default_model, root, LONG_TEXT, None, 256, 0, 4, 120, (100, 120, 139))
    requests.clear()
    type_number(panel, "attention-head", 0)                   # held since the first answer
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q120-100")
    page.wait_for_timeout(500)
    assert "neuron_view_refresh" not in joined(page, requests), joined(page, requests)

    with page.expect_download() as download:                  # the PNG (2x, for print) is the canvas as drawn
        root.get_by_role("button", name="Save the neuron view as a PNG at 2x, for print").click()
    assert download.value.suggested_filename == "bert-explorer_default_the-cat-sat-on-the-mat_neuron-view_L1H0Q120.png"
    saved = np.asarray(Image.open(io.BytesIO(open(download.value.path(), "rb").read())).convert("RGBA"))
    height, width = root.locator("canvas").evaluate("c => [parseFloat(c.style.height), parseFloat(c.style.width)]")
    assert list(saved.shape[:2]) == [round(2 * height), round(2 * width)]
    middle = root.locator("canvas").evaluate("""c => { const g = window.BertNeuronView.views[0].geometry;
        const x = g.xP + 2.5 * g.cell, y = g.top + 1.5 * g.rowH, dpr = window.devicePixelRatio || 1;   // a cell's middle
        const px = c.getContext('2d').getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data;
        return [Math.floor(2 * x), Math.floor(2 * y), ...px]; }""")
    assert list(saved[middle[1], middle[0]]) == middle[2:]
    no_error_toast(page)


LARGE_TEXT = LONG_TEXT + " " + LONG_TEXT         # past 512 tokens: cut to 512


@pytest.fixture(scope="module")
def large(app_served):
    """The bert-large-shaped model (``support.browser_helpers.pin_large_model``), pinned in the served app."""
    return pin_large_model(app_served.services)


def sizes_of(page: Page):
    """A list that fills with (the event's api name, or "stream" for the answers' event stream; bytes sent and
    received) for each request the page finishes, but the timers' polls; and a function that waits until no
    answer stream is open."""
    config = page.evaluate("() => window.gradio_config")
    ticks = {d["id"] for d in config["dependencies"] if d["targets"] and all(t[1] == "tick" for t in d["targets"])}
    names = {d["id"]: d.get("api_name") for d in config["dependencies"]}
    found, streams = [], set()

    def finished(request) -> None:
        streams.discard(request)
        body = json.loads(request.post_data) if "/queue/join" in request.url else None
        if body is None or body["fn_index"] not in ticks:
            size = request.sizes()
            found.append((str(names.get(body["fn_index"])) if body else "stream",
                          size["requestBodySize"] + size["responseBodySize"]))

    page.on("request", lambda r: streams.add(r) if "/queue/data" in r.url else None)
    page.on("requestfinished", finished)
    page.on("requestfailed", lambda r: streams.discard(r))

    def settle() -> None:
        for _ in range(600):                                  # a state, not a time: every answer stream closed
            if not streams:
                return
            page.wait_for_timeout(100)
        raise AssertionError("an answer stream stayed open")

    return found, settle


def test_at_512_tokens_on_a_bert_large_a_change_is_one_request_under_300_kb_and_a_dropdown_pick_asks_nothing(
        large, desktop: Page) -> None:
    """With the neuron view open, a layer change that neither view holds is one request (``attention_fetch_both``):
    that head's vectors and as many of that layer's maps as fit, 300 KB at most in all (two requests, ~360 KB,
    before). A query token picked in the dropdown, with the mouse or typed and Enter, is drawn with no request (the
    page holds the head's every token)."""
    page = desktop
    panel = open_tab(page, "Attention")
    choose_option(page, page.get_by_label("Model (used by every probing tab)"), LARGE)
    expect(page.locator(".model-info").last).to_contain_text("24 layers × 16 heads")
    panel.get_by_label("Text", exact=True).fill(LARGE_TEXT)
    length = panel.get_by_label("Max length", exact=False).first.locator(
        "xpath=ancestor::div[contains(@class,'block')][1]").locator("input[type=number]")
    length.fill("512")
    length.press("Enter")
    panel.get_by_role("button", name="Show attention").click()
    heat = panel.locator(".attention-heatmap .attn-view").first
    expect(heat).to_have_attribute("data-drawn", "L1-H0")
    root = shown(page, panel)
    expect(root.locator(".neuron-controls")).to_contain_text("key tokens 0–39 of 512")
    found, settle = sizes_of(page)
    type_number(panel, "attention-layer", 3)                  # neither view holds layer 3
    expect(heat).to_have_attribute("data-drawn", "L3-H0")
    expect(root).to_have_attribute("data-drawn", "L3-H0-Q0-0")
    settle()
    assert [name for name, _ in found if name != "stream"] == ["attention_fetch_both"], found
    assert sum(size for _, size in found) <= 300_000, found
    check_row(page, large, root, LARGE_TEXT, None, 512, 2, 0, 0, (0, 7))

    found.clear()                                             # the dropdown: a mouse pick, then a typed one
    query = panel.locator("#neuron-query input")
    choose_option(page, query, "20: ")
    expect(root).to_have_attribute("data-drawn", "L3-H0-Q20-0")
    query.click()                                             # typed: the keys a keyboard user presses
    page.keyboard.press("Control+a")
    page.keyboard.type("33")
    page.keyboard.press("Enter")                              # the dropdown's own Enter, not "Show the neuron view"
    expect(root).to_have_attribute("data-drawn", "L3-H0-Q33-0")
    page.wait_for_timeout(500)
    assert [name for name, _ in found if name != "stream"] == [], found
    no_error_toast(page)
