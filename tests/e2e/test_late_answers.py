"""A late answer never undoes what the user just picked (docs/design/browser-views.md, *Late answers*), in every
canvas view, in a real chromium: the page's request is held in the browser (``support/held_requests.py``) while
the user changes the selection in the page, then released; the server's answer, computed for the state at the
ask, arrives after the user's change and brings its data, but the selection stays. A new ask made after the
pick is answered as asked."""
from __future__ import annotations

from playwright.sync_api import Page, expect

from support.browser_helpers import no_error_toast, open_tab, run_first_example
from support.held_requests import answers, expect_answers, held

LONG_TEXT = " ".join(["The cat sat on the mat because it was tired, and the dog watched it from the door."] * 14)


def type_number(panel, elem_id: str, value: int) -> None:
    box = panel.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def long_input(panel) -> None:
    """The Attention tab's text: 256 tokens (the head view and the neuron view show a window of them)."""
    panel.get_by_label("Text", exact=True).fill(LONG_TEXT)
    length = panel.get_by_label("Max length", exact=False).first.locator(
        "xpath=ancestor::div[contains(@class,'block')][1]").locator("input[type=number]")
    length.fill("256")
    length.press("Enter")


def click_token(page: Page, root, key: int) -> None:
    """Click key token ``key``'s label in the neuron view (it must be inside the window)."""
    g = page.evaluate("() => window.BertNeuronView.views[0].geometry")
    root.locator("canvas").scroll_into_view_if_needed()
    box = root.locator("canvas").bounding_box()
    page.mouse.click(box["x"] + g["labelW"] / 2, box["y"] + g["top"] + (key - g["start"] + 0.5) * g["rowH"])


def test_the_neuron_views_query_and_window_outlive_an_answer_asked_before_them(desktop: Page) -> None:
    """The case CI failed on at random: the user slides the key window and clicks key token 120 while the answer
    to *Show the neuron view* (query 0) is on its way; it arrives and the view stays at query 120, window 100.
    The answer to the next *Show* (asked after the pick) shows the dropdown's query again; the dropdown's new
    choices after *Show attention* (set by the server) move nothing."""
    page = desktop
    panel = open_tab(page, "Attention")
    long_input(panel)
    panel.get_by_text("Neuron view: the numbers behind one row of the heatmap").click()
    show = panel.get_by_role("button", name="Show the neuron view")
    show.click()
    root = panel.locator(".neuron-canvas-view .neuron-view").first
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q0-0")
    taken = answers(root)
    with held(page, "neuron_view") as late:
        show.click()                                          # asks for query 0; its answer is held
        late.wait()
        root.locator("input.neuron-window").fill("100")
        click_token(page, root, 120)
        expect(root).to_have_attribute("data-drawn", "L1-H0-Q120-100")
        late.release()
        expect_answers(root, taken + 1)                       # the late answer came and was taken
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q120-100")
    page.wait_for_timeout(400)                                # two polls of the sliders and the dropdown
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q120-100")

    panel.get_by_role("button", name="Show attention").click()   # the server sets the dropdown's choices
    expect(panel.locator(".attention-heatmap .attn-view").first).to_have_attribute("data-drawn", "L1-H0")
    page.wait_for_timeout(700)
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q120-100")

    show.click()                                              # asked after the pick: the dropdown's query
    expect_answers(root, taken + 2)
    expect(root).to_have_attribute("data-drawn", "L1-H0-Q0-0")
    no_error_toast(page)


def test_the_attention_views_keep_the_window_hidden_heads_and_head_through_a_late_answer(desktop: Page) -> None:
    """The heatmap, head view and model view: while *Show attention* is on its way for head 0, the user slides the
    head view's window, hides head 3 there and types head 4; the answer (the same input) brings its maps and the
    views stay where the user put them."""
    page = desktop
    panel = open_tab(page, "Attention")
    long_input(panel)
    button = panel.get_by_role("button", name="Show attention")
    button.click()
    heat, heads, grid = (panel.locator(f".attention-{kind} .attn-view").first
                         for kind in ("heatmap", "head-view", "model-view"))
    expect(heat).to_have_attribute("data-drawn", "L1-H0")
    expect(heads.locator(".attn-controls")).to_contain_text("tokens 0–39 of 256")
    taken = {v: answers(v) for v in (heat, heads, grid)}
    with held(page, "attention") as late:
        button.click()                                        # asked at head 0; its answer is held
        late.wait()
        heads.locator("input.attn-window").fill("100")
        heads.locator(".attn-chip[data-head='3']").click()
        type_number(panel, "attention-head", 4)               # the same layer: drawn here
        expect(heat).to_have_attribute("data-drawn", "L1-H4")
        expect(heads).to_have_attribute("data-drawn", "L1-H4-100")
        late.release()
        for v, count in taken.items():
            expect_answers(v, count + 1)
    expect(heads).to_have_attribute("data-drawn", "L1-H4-100")
    expect(heads.locator(".attn-chip[data-head='3']")).to_have_attribute("aria-pressed", "false")
    expect(heads.locator(".attn-controls")).to_contain_text("tokens 100–139 of 256")
    expect(heat).to_have_attribute("data-drawn", "L1-H4")
    expect(grid).to_have_attribute("data-drawn", "L1-H4")
    no_error_toast(page)


def test_the_embeddings_maps_keep_the_component_picked_while_an_answer_was_on_its_way(desktop: Page) -> None:
    """While *Show embeddings* is on its way (computed for the component shown at the ask), the user picks the
    segment embeddings; the answer arrives and the map stays on the segment embeddings."""
    page = desktop
    panel = open_tab(page, "Embeddings")
    run_first_example(panel)
    dims = panel.locator(".embeddings-dimensions .emb-view").first
    expect(dims).to_have_attribute("data-drawn", "output")
    taken = answers(dims)
    with held(page, "embeddings") as late:
        panel.get_by_role("button", name="Show embeddings").click()
        late.wait()
        panel.locator("#embeddings-component").get_by_label("segment (token type)", exact=True).check()
        expect(dims).to_have_attribute("data-drawn", "segment")
        late.release()
        expect_answers(dims, taken + 1)
    expect(dims).to_have_attribute("data-drawn", "segment")
    no_error_toast(page)
