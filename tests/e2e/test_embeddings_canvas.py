"""The Embeddings tab's canvas maps (hidden dimensions, position similarity) in a real chromium, in the light and
the dark theme and at phone width (390 px): the first example draws both; hovering a cell shows the engine's value
to the encoding's precision (uint8 of v - min: (max - min) / 510; float16 cosines: 2**-11); a component the page
holds is drawn with **no network request**, a layer change redraws the summary but sends no map; the PNG (2x) is the
drawing, its cells the colour the engine's value maps to; a component the page lacks is fetched once."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from engine.probes.inference import embeddings
from explorer.embeddings import canvas
from explorer.embeddings.sections import EXAMPLES
from support.browser_helpers import ARTIFACTS, no_error_toast, open_tab, opened, run_first_example



def view(panel, kind: str):
    return panel.locator(f".embeddings-{kind} .emb-view").first


def engine_result(model):
    text, pair = EXAMPLES[0]
    return embeddings(model, text, pair or None)


def called(page: Page, requests: list[str]) -> list[str]:
    """The api names of the events the page called among ``requests``, but the timers' polls (the model
    picker's list every 5 s)."""
    deps = page.evaluate("() => window.gradio_config")["dependencies"]
    ticks = {d["id"] for d in deps if d["targets"] and all(t[1] == "tick" for t in d["targets"])}
    names = {d["id"]: d.get("api_name") for d in deps}
    joined = [json.loads(r.split(" ", 1)[1])["fn_index"] for r in requests if "/queue/join" in r]
    return [names.get(i) for i in joined if i not in ticks]


def hover(page: Page, v, row: int, col: int) -> tuple[float, dict]:
    """Hover cell (row, col) of view ``v``; the tooltip's value and the view's geometry."""
    kind = v.get_attribute("data-kind")
    v.locator("canvas").scroll_into_view_if_needed()
    geometry = page.evaluate(f"() => window.BertEmbeddingsViews.views.find(v => v.kind === '{kind}').geometry")
    box = v.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + geometry["left"] + (col + 0.5) * geometry["cw"],
                    box["y"] + geometry["top"] + (row + 0.5) * geometry["ch"])
    tip = v.locator(".emb-tip")
    expect(tip).to_have_class("emb-tip shown")
    assert (int(tip.get_attribute("data-row")), int(tip.get_attribute("data-col"))) == (row, col)
    return float(tip.get_attribute("data-value")), geometry


def pick(panel, label: str) -> None:
    panel.locator("#embeddings-component").get_by_label(label, exact=True).check()


def test_the_maps_draw_follow_the_component_without_a_request_and_hover_the_engines_values(
        page: Page, default_model) -> None:
    panel = open_tab(page, "Embeddings")
    run_first_example(panel)                                  # "Who was Jim Henson?" / "Jim Henson was a nice puppet"
    dims, sims = view(panel, "dimensions"), view(panel, "similarity")
    expect(dims).to_have_attribute("data-drawn", "output")
    expect(sims).to_have_attribute("data-drawn", "cosine")
    result = engine_result(default_model)
    spread = lambda a: (float(a.max()) - float(a.min())) / 510 + 1e-5     # noqa: E731 - uint8 of v - min
    value, geometry = hover(page, dims, 3, 17)
    assert abs(value - result.output[3, 17]) <= spread(result.output)
    assert abs(hover(page, sims, 5, 9)[0] - result.position_similarity[5, 9]) <= 2.0 ** -11 + 1e-6

    if page.look == "light":                                  # type: ignore[attr-defined]
        with page.expect_download() as download:              # the PNG (at 2x, for print) is the drawing
            dims.get_by_role("button", name="Save the hidden dimensions map as a PNG at 2x, for print").click()
        assert download.value.suggested_filename == \
            "bert-explorer_default_who-was-jim-henson_embeddings-dimensions_output.png"
        png = np.asarray(Image.open(io.BytesIO(open(download.value.path(), "rb").read())).convert("RGB"))
        shown = canvas.decoded(canvas.signed_map(result.output))[3, 17]
        level = int(canvas.levels(shown, canvas.color_limit(result.output)))
        colour = canvas.palette()[level]
        x = int(2 * (geometry["left"] + 17.5 * geometry["cw"])), int(2 * (geometry["top"] + 3.5 * geometry["ch"]))
        assert png[x[1], x[0]].tolist() == [int(colour[k:k + 2], 16) for k in (1, 3, 5)]

    requests: list[str] = []
    page.on("request", lambda request: requests.append(f"{request.url} {request.post_data}"))
    pick(panel, "word (token)")
    expect(dims).to_have_attribute("data-drawn", "word")
    expect(dims.locator(".emb-caption")).to_contain_text("Hidden dimensions: word (token)")
    assert abs(hover(page, dims, 2, 5)[0] - result.word[2, 5]) <= spread(result.word)
    page.wait_for_timeout(500)
    assert called(page, requests) == [], requests            # drawn from the maps the page already held

    draws = dims.get_attribute("data-draws")
    layer = panel.get_by_label("Layer for the contextual view", exact=False).first.locator(
        "xpath=ancestor::div[contains(@class,'block')][1]").locator("input[type=number]")
    layer.fill("2")
    layer.press("Enter")
    expect(panel.locator(".embeddings-summary").last).to_contain_text("contextual view at layer 2 of 6")
    assert called(page, requests) == ["embeddings_refresh"]
    assert dims.get_attribute("data-draws") == draws         # no map came, none was redrawn
    no_error_toast(page)

    caption = dims.locator(".emb-caption")                    # the words read on the page in either theme
    colour = caption.evaluate("e => getComputedStyle(e).color")
    bright = sum(int(c) for c in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3]) / 3
    assert (bright > 150) if page.look == "dark" else (bright < 120), (page.look, colour)   # type: ignore[attr-defined]
    width = page.viewport_size["width"]
    for v in (dims, sims):                                    # nothing wider than the screen (wide maps scroll)
        box = v.locator(".emb-scroll").bounding_box()
        assert box["x"] + box["width"] <= width + 1, (page.look, box)  # type: ignore[attr-defined]
    page.screenshot(path=str(ARTIFACTS / f"embeddings-canvas-{page.look}.png"),  # type: ignore[attr-defined]
                    full_page=True)


def test_a_component_the_page_lacks_is_fetched_once(browser: Browser, app_served, default_model,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With the budget at 0 every answer carries the chosen component alone (as bert-large at 512 tokens does): a
    new component is asked for once (``embeddings_component``, answered from the kept result), and the ones the
    page then holds are drawn with no request."""
    monkeypatch.setattr(canvas, "ALL_COMPONENTS_BUDGET", 0)
    with opened(browser, app_served.url) as page:
        panel = open_tab(page, "Embeddings")
        run_first_example(panel)
        dims = view(panel, "dimensions")
        expect(dims).to_have_attribute("data-drawn", "output")
        requests: list[str] = []
        page.on("request", lambda request: requests.append(f"{request.url} {request.post_data}"))
        pick(panel, "segment (token type)")
        expect(dims).to_have_attribute("data-drawn", "segment")
        result = engine_result(default_model)
        spread = (float(result.segment.max()) - float(result.segment.min())) / 510 + 1e-5
        assert abs(hover(page, dims, 4, 7)[0] - result.segment[4, 7]) <= spread
        assert called(page, requests) == ["embeddings_component"], requests
        pick(panel, "after LayerNorm (embedding output)")
        expect(dims).to_have_attribute("data-drawn", "output")
        pick(panel, "segment (token type)")
        expect(dims).to_have_attribute("data-drawn", "segment")
        page.wait_for_timeout(500)
        assert called(page, requests) == ["embeddings_component"], requests   # both held now
        no_error_toast(page)
