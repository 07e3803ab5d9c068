"""The Attention tab's canvas views in a real chromium, in the light and the dark theme and at phone width
(390 px): the first example draws the heatmap, head view and model view; a typed layer and head redraw all
three with **no network request** (the browser holds every layer's maps for a short input); hovering a cell
shows the engine's weight to the uint8 encoding's precision (1/510); a click on the model view picks that
layer and head; the caption reads on the page's background in both themes and the views fit a phone. The head
view offers a button per head of the model picked (16 for a bert-large shape), and when its links are all too weak
to see (a random model's near-uniform attention) it says so and offers a lower threshold."""
from __future__ import annotations

import json

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from engine.model.loaded_model import LoadedModel
from engine.probes.inference import attention
from explorer.attention.sections import EXAMPLES
from explorer.views.browser_arrays import LEVELS
from support.browser_helpers import (ARTIFACTS, LARGE, choose_option, no_error_toast, open_tab, pin_large_model,
                                     run_first_example)

PRECISION = 1.0 / (2 * LEVELS) + 1e-6          # uint8 with scale 1.0


def view(panel, kind: str):
    return panel.locator(f".attention-{kind} .attn-view").first


def type_number(panel, elem_id: str, value: int) -> None:
    box = panel.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def engine_maps(model) -> np.ndarray:
    text, pair = EXAMPLES[0]
    return attention(model, text, pair or None, 128).attentions   # (L, nh, S, S)


def sent(page: Page, requests: list[str]) -> list[str]:
    """The requests but the page's timers' polls (the model picker's list, every 5 s) and the event stream
    that carries their answers."""
    config = page.evaluate("() => window.gradio_config")
    ticks = {d["id"] for d in config["dependencies"] if d["targets"] and all(t[1] == "tick" for t in d["targets"])}
    polls = [r for r in requests if "/queue/join" in r and json.loads(r.split(" ", 1)[1])["fn_index"] in ticks]
    return [r for r in requests if r not in polls and "/queue/data" not in r]


def called(page: Page, requests: list[str]) -> list[str]:
    """The api names of the events the page called among ``requests`` (as :func:`sent` filters them)."""
    names = {d["id"]: d.get("api_name") for d in page.evaluate("() => window.gradio_config")["dependencies"]}
    return [names.get(json.loads(r.split(" ", 1)[1])["fn_index"]) for r in sent(page, requests) if "/queue/join" in r]


def painted(canvas) -> int:
    """How many of the canvas's pixels are not transparent."""
    return canvas.evaluate("""c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""")


def hover_cell(page: Page, panel, query: int, key: int) -> float:
    """Hover the heatmap's cell (query, key); the tooltip's value."""
    heat = view(panel, "heatmap")
    heat.locator("canvas").scroll_into_view_if_needed()
    geometry = page.evaluate("() => window.BertAttentionViews.views.find(v => v.kind === 'heatmap').geometry")
    box = heat.locator("canvas").bounding_box()
    x = box["x"] + geometry["left"] + (key + 0.5) * geometry["cell"]
    y = box["y"] + geometry["top"] + (query + 0.5) * geometry["cell"]
    page.mouse.move(x, y)
    tip = heat.locator(".attn-tip")
    expect(tip).to_have_class("attn-tip shown")
    assert (int(tip.get_attribute("data-query")), int(tip.get_attribute("data-key"))) == (query, key)
    return float(tip.get_attribute("data-value"))


def test_the_views_draw_follow_the_sliders_without_a_request_and_hover_the_engines_numbers(
        page: Page, default_model) -> None:
    panel = open_tab(page, "Attention")
    run_first_example(panel)                                  # "The cat sat on the mat because it was tired."
    heat, heads, grid = (view(panel, kind) for kind in ("heatmap", "head-view", "model-view"))
    expect(heat).to_have_attribute("data-drawn", "L1-H0")
    expect(grid).to_have_attribute("data-drawn", "L1-H0")
    expect(heads).to_have_attribute("data-drawn", "L1-H0-0")
    assert all(painted(v.locator("canvas")) > 500 for v in (heat, heads, grid))
    maps = engine_maps(default_model)
    assert abs(hover_cell(page, panel, 3, 1) - maps[0, 0, 3, 1]) <= PRECISION

    requests: list[str] = []
    page.on("request", lambda request: requests.append(f"{request.url} {request.post_data}"))
    type_number(panel, "attention-layer", 3)
    type_number(panel, "attention-head", 2)
    for v in (heat, grid):
        expect(v).to_have_attribute("data-drawn", "L3-H2")
    expect(heads).to_have_attribute("data-drawn", "L3-H2-0")
    expect(heat.locator(".attn-caption")).to_contain_text("Layer 3, head 2")
    for query, key in ((0, 0), (4, 2), (len(maps[0, 0]) - 1, 5)):
        assert abs(hover_cell(page, panel, query, key) - maps[2, 2, query, key]) <= PRECISION
    page.wait_for_timeout(500)
    assert sent(page, requests) == [], requests              # drawn from the maps the page already held

    tile = page.evaluate("() => window.BertAttentionViews.views.find(v => v.kind === 'model_view').geometry")
    grid.locator("canvas").scroll_into_view_if_needed()
    box = grid.locator("canvas").bounding_box()               # a click on layer 2, head 1 of the model view
    page.mouse.click(box["x"] + tile["left"] + 1 * (tile["tile"] + tile["gap"]) + tile["tile"] / 2,
                     box["y"] + tile["top"] + 1 * (tile["tile"] + tile["gap"]) + tile["tile"] / 2)
    expect(heat).to_have_attribute("data-drawn", "L2-H1")
    expect(panel.locator("#attention-layer input[type=number]")).to_have_value("2")
    assert sent(page, requests) == [], requests
    no_error_toast(page)

    caption = heat.locator(".attn-caption")                   # the words read on the page in either theme
    colour = caption.evaluate("e => getComputedStyle(e).color")
    bright = sum(int(c) for c in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3]) / 3
    assert (bright > 150) if page.look == "dark" else (bright < 120), (page.look, colour)   # type: ignore[attr-defined]
    width = page.viewport_size["width"]
    for v in (heat, heads, grid):                              # nothing wider than the screen
        right = v.locator("canvas").bounding_box()
        assert right["x"] + right["width"] <= width + 1, (page.look, right)  # type: ignore[attr-defined]
    page.screenshot(path=str(ARTIFACTS / f"attention-canvas-{page.look}.png"),  # type: ignore[attr-defined]
                    full_page=True)


LONG_TEXT = " ".join(["The cat sat on the mat because it was tired, and the dog watched it from the door."] * 14)


def test_a_long_input_fetches_a_layer_it_lacks_and_windows_the_head_view(desktop: Page, default_model) -> None:
    """At 256 tokens the default model's maps (6 x 12 x 256²) exceed what one answer sends: the chosen layer's
    come (deflated), a head change in that layer stays in the browser, a layer change asks once (the ``fetch``
    event); the head view shows a window of tokens that the user slides, with no request; the answer to the
    fetch carries that layer's maps only (the model view keeps the grid it holds). A *Heads in the head view*
    change asks ``attention_heads`` alone and the heatmap is not redrawn (no maps came); a *Head statistic*
    change asks ``attention_refresh`` alone."""
    page = desktop
    panel = open_tab(page, "Attention")
    panel.get_by_label("Text", exact=True).fill(LONG_TEXT)
    length = panel.get_by_label("Max length", exact=False).first.locator(
        "xpath=ancestor::div[contains(@class,'block')][1]").locator("input[type=number]")
    length.fill("256")
    length.press("Enter")
    panel.get_by_role("button", name="Show attention").click()
    heat, heads = view(panel, "heatmap"), view(panel, "head-view")
    expect(heat).to_have_attribute("data-drawn", "L1-H0")
    expect(heads.locator(".attn-controls")).to_contain_text("tokens 0–39 of 256")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(f"{request.url} {request.post_data}"))
    heads.locator("input.attn-window").fill("100")                     # slide the window: drawn here
    expect(heads).to_have_attribute("data-drawn", "L1-H0-100")
    chip = heads.locator(".attn-chip[data-head='3']")                  # hide head 3 here: drawn here
    chip.click()
    expect(chip).to_have_attribute("aria-pressed", "false")
    type_number(panel, "attention-head", 4)                            # the same layer: drawn here
    expect(heat).to_have_attribute("data-drawn", "L1-H4")
    page.wait_for_timeout(500)
    assert sent(page, requests) == [], requests
    type_number(panel, "attention-layer", 2)                           # another layer: asked for once
    expect(heat).to_have_attribute("data-drawn", "L2-H4")
    expect(view(panel, "model-view")).to_have_attribute("data-drawn", "L2-H4")   # its grid kept, not resent
    asked = [r for r in sent(page, requests) if "/queue/join" in r]
    assert len(asked) == 1, asked
    text_maps = attention(default_model, LONG_TEXT, None, 256).attentions
    assert abs(hover_cell(page, panel, 200, 3) - text_maps[1, 4, 200, 3]) <= PRECISION
    assert page.evaluate("() => window.BertAttentionViews.store.entries")   # inflated from the deflated maps

    requests.clear()                                                   # a heads change: the head view alone
    draws = heat.get_attribute("data-draws")
    panel.get_by_role("combobox", name="Heads in the head view").click()
    page.get_by_role("option", name="3", exact=True).click()           # deselect head 3
    page.keyboard.press("Escape")
    expect(heads.locator(".attn-chip")).to_have_count(12)                # a chip per head of the model
    expect(heads.locator(".attn-chip[data-head='3']")).to_have_attribute("aria-pressed", "false")
    expect(heads).to_have_attribute("data-drawn", "L2-H4-100")                # the window it had
    page.wait_for_timeout(500)
    assert set(called(page, requests)) == {"attention_heads"}, called(page, requests)   # the click, the close
    assert heat.get_attribute("data-draws") == draws                  # the maps were not sent again

    requests.clear()                                                   # a statistic change: its figure alone
    panel.get_by_role("combobox", name="Head statistic").click()
    page.get_by_role("option", name="share to [SEP]", exact=True).click()
    expect(panel.locator(".js-plotly-plot").filter(has_text="share to [SEP]").first).to_be_attached()
    page.wait_for_timeout(500)
    assert set(called(page, requests)) == {"attention_refresh"}, called(page, requests)
    assert heat.get_attribute("data-draws") == draws
    no_error_toast(page)


def test_the_neuron_view_follows_a_head_changed_in_the_browser(desktop: Page) -> None:
    """Once shown, the neuron view follows the head the canvas views show (the heatmap's ``neuron`` event)."""
    page = desktop
    panel = open_tab(page, "Attention")
    run_first_example(panel)
    expect(view(panel, "heatmap")).to_have_attribute("data-drawn", "L1-H0")
    panel.get_by_text("Neuron view: the numbers behind one row of the heatmap").click()
    panel.get_by_role("button", name="Show the neuron view").click()
    summary = panel.locator(".neuron-summary").last
    expect(summary).to_contain_text("Layer 1, head 0, query 0")
    type_number(panel, "attention-head", 5)
    expect(view(panel, "heatmap")).to_have_attribute("data-drawn", "L1-H5")
    expect(summary).to_contain_text("Layer 1, head 5, query 0")
    no_error_toast(page)




@pytest.fixture(scope="module")
def large(app_served) -> LoadedModel:
    """The bert-large-shaped model (``support.browser_helpers.pin_large_model``), pinned in the served app."""
    return pin_large_model(app_served.services)


def hover_query(page: Page, heads, index: int) -> str:
    """Hover query token ``index`` of the head view (inside its window); the tooltip's text."""
    g = page.evaluate("() => window.BertAttentionViews.views.find(v => v.kind === 'head_view').geometry")
    heads.locator("canvas").scroll_into_view_if_needed()
    box = heads.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + g["x0"] - 8, box["y"] + g["top"] + (index - g["start"] + 0.5) * g["row"])
    tip = heads.locator(".attn-tip")
    expect(tip).to_have_class("attn-tip shown")
    return tip.inner_text()


def test_a_16_head_model_gets_a_button_per_head_and_a_near_uniform_view_says_why(large, desktop: Page) -> None:
    """Picked after the 12-head default, a bert-large shape's head view offers heads 0-15: a click on head 14 draws
    it (its links in the hover) or hides it. At 512 tokens its random attention is near uniform: every link is
    below the head view's threshold, so the view says so (the strongest weight, the uniform one) and offers a
    lower threshold, which draws the links (opacity relative to the strongest), and the way back."""
    page = desktop
    panel = open_tab(page, "Attention")
    choose_option(page, page.get_by_label("Model (used by every probing tab)"), LARGE)
    expect(page.locator(".model-info").last).to_contain_text("24 layers × 16 heads")
    run_first_example(panel)
    heads = view(panel, "head-view")
    expect(heads).to_have_attribute("data-drawn", "L1-H0-0")
    expect(heads.locator(".attn-chip")).to_have_count(16)
    chip = heads.locator(".attn-chip[data-head='14']")
    for _ in range(2):                                        # on, then off (or off, then on)
        pressed = chip.get_attribute("aria-pressed") == "true"
        chip.click()
        expect(chip).to_have_attribute("aria-pressed", str(not pressed).lower())
        assert ("head 14:" in hover_query(page, heads, 3)) is not pressed
        page.mouse.move(0, 0)

    panel.get_by_label("Text", exact=True).fill(" ".join([EXAMPLES[0][0]] * 60))   # cut to 512 tokens
    length = panel.get_by_label("Max length", exact=False).first.locator(
        "xpath=ancestor::div[contains(@class,'block')][1]").locator("input[type=number]")
    length.fill("512")
    length.press("Enter")
    panel.get_by_role("button", name="Show attention").click()
    expect(heads.locator(".attn-controls").first).to_contain_text("tokens 0–39 of 512")
    note = heads.locator(".attn-note")
    expect(note).to_contain_text("below the threshold 0.02: the attention is near uniform")
    expect(note).to_contain_text("uniform over 512 tokens is 0.002")
    empty = painted(heads.locator("canvas"))                  # the token labels alone
    note.get_by_role("button", name="Show links ≥").click()
    expect(note).to_contain_text("opacity relative to the strongest")
    assert float(heads.get_attribute("data-threshold")) < 0.02
    assert painted(heads.locator("canvas")) > empty + 5_000   # the links, drawn
    heads.screenshot(path=str(ARTIFACTS / "attention-head-view-near-uniform.png"))
    note.get_by_role("button", name="Back to 0.02").click()
    expect(heads).to_have_attribute("data-threshold", "0.02")
    expect(note).to_contain_text("below the threshold 0.02")
    no_error_toast(page)
