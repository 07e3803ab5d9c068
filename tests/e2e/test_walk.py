"""A first-time user's walk through every tab in a real browser (chromium, Playwright), once in
the light theme and once in the dark one (``?__theme=dark``), and the tests not marked ``desktop`` a third time
at phone width (390 px): the picker lists the models available
when the page opens, typed layer/head values redraw the attention figures, Tokenize shows the pieces
the model sees, a typed layer redraws the Embeddings summary and its contextual PCA, the neighbours open on
the first word, the marked corpus neighbour reads in both themes, a failed call clears what it would have
replaced, the training rates step sensibly (ArrowUp), the training controls are greyed out when they cannot act,
Pause says "pausing after this step…" at once, a refused Start keeps the status, the training states read right,
every figure follows the theme, fill-mask's masks share one probability scale in percent, QA never shows a
probability over 100% (these two, about numbers, in the light theme only), and the run browser overlays two runs. Screenshots of each tab per look go to
``test-artifacts/walk-<tab>-<light|dark|phone>.png``."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from support.browser_helpers import (
    ARTIFACTS,
    PLOT,
    TIMEOUT_MS,
    check_figures_follow_the_theme,
    check_titles_fit_the_screen,
    choose_option,
    contrast,
    no_error_toast,
    open_tab,
    run_first_example,
    served_app,
)
from support.cli_helpers import run_cli
from support.probing_helpers import write_run

THEMES = ("light", "dark")
LOOKS = (*THEMES, "phone")              # a test marked ``desktop`` runs in the two themes only
PHONE = {"width": 390, "height": 844}
desktop = pytest.mark.parametrize("page", THEMES, indirect=True)
one_look = pytest.mark.parametrize("page", THEMES[:1], indirect=True)   # numbers only: the look changes nothing
BROWSED_RUNS = (("walk-a", 6), ("walk-b", 8))
TINY_CLI = ["--preset", "tiny", "--max-documents", "20", "--seq-len", "32", "--vocab-size", "300", "--threads", "1",
            "--no-progress", "--log-every", "1"]
SERVED: dict = {}                       # the served app's training worker, to explain a failure


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    runs = tmp_path_factory.mktemp("walk-runs")
    for name, steps in BROWSED_RUNS:            # two finished command-line runs for the run browser to overlay
        done = run_cli([*TINY_CLI, "--steps", str(steps), "--run-dir", str(runs / name)])
        assert done.returncode == 0, done.stderr[-3000:]
    with served_app(runs) as (url, services):
        SERVED["worker"] = services.get_worker()
        yield url, runs


@pytest.fixture(scope="module", params=LOOKS)
def page(request: pytest.FixtureRequest, browser: Browser, served: tuple[str, Path]) -> Iterator[Page]:
    """The app in one look: the light or the dark theme on a desktop, or the light theme at phone width."""
    url, _ = served
    page = browser.new_page(viewport=PHONE if request.param == "phone" else {"width": 1360, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url + ("?__theme=dark" if request.param == "dark" else ""))
    expect(page.locator(".model-info").last).to_contain_text("Heads:")
    page.theme = "dark" if request.param == "dark" else "light"   # type: ignore[attr-defined]  # theme checks
    page.look = request.param           # type: ignore[attr-defined]  # screenshot names
    yield page
    page.close()


def close_toasts(page: Page) -> None:
    for close in page.locator(".toast-close").all():
        close.click()


def screenshot(page: Page, name: str) -> None:
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / f"walk-{name}-{page.look}.png"), full_page=True)  # type: ignore[attr-defined]


def plot_in(panel, label: str):
    """The Plotly plot of the ``gr.Plot`` labelled ``label``."""
    return panel.locator(".block").filter(has=panel.page.get_by_text(label, exact=True)).locator(PLOT).first


def test_the_picker_lists_the_models_of_when_the_page_opened(browser: Browser, served: tuple[str, Path],
                                                              tiny_tokenizer) -> None:
    url, runs = served
    write_run(runs, tiny_tokenizer, steps=(2, 4), run="walk-run")       # after the app started
    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    try:
        page.goto(url)
        expect(page.locator(".model-info").last).to_contain_text("Heads:")
        page.get_by_label("Model (used by every probing tab)").click()
        expect(page.get_by_role("option").filter(has_text="walk-run · step 4").first).to_be_visible()
    finally:
        page.close()


@desktop
def test_attention_follows_typed_layer_and_head(page: Page) -> None:
    panel = open_tab(page, "Attention")
    run_first_example(panel)
    heatmap = panel.locator(".attention-heatmap .attn-view").first          # a canvas view (attention_view.js)
    expect(heatmap.locator(".attn-caption")).to_contain_text("Layer 1, head 0")
    for label, value in (("Layer (from 1)", "3"), ("Head (from 0)", "2")):
        box = panel.get_by_label(label, exact=False).locator("xpath=ancestor::div[contains(@class,'block')][1]")
        number = box.locator("input[type=number]")
        number.fill(value)
        number.press("Enter")
    expect(heatmap.locator(".attn-caption")).to_contain_text("Layer 3, head 2")
    expect(heatmap).to_have_attribute("data-drawn", "L3-H2")
    no_error_toast(page)
    screenshot(page, "attention")


def number_box(panel, label: str):
    """The ``<input type=number>`` of the field (a slider's box, a gr.Number) labelled ``label``."""
    block = panel.get_by_label(label, exact=False).first.locator("xpath=ancestor::div[contains(@class,'block')][1]")
    return block.locator("input[type=number]")


def test_embeddings_follows_a_typed_layer_and_opens_on_the_first_word(page: Page) -> None:
    panel = open_tab(page, "Embeddings")
    run_first_example(panel)                                  # "Who was Jim Henson?" / "Jim Henson was a nice puppet"
    summary = panel.locator(".embeddings-summary").last
    expect(summary).to_contain_text("contextual view at layer 6 of 6")
    expect(panel.get_by_label("Nearest neighbours of")).to_have_value("1: who")     # its first word, not [CLS]
    layer = number_box(panel, "Layer for the contextual view")
    layer.fill("2")
    layer.press("Enter")
    expect(summary).to_contain_text("contextual view at layer 2 of 6")
    expect(plot_in(panel, "Contextual PCA").locator(".gtitle")).to_contain_text("vectors at layer 2")
    layer.fill("6")                                           # as the other tests of this page expect it
    layer.press("Enter")
    expect(summary).to_contain_text("contextual view at layer 6 of 6")
    no_error_toast(page)


@desktop
def test_the_marked_corpus_neighbour_reads_in_both_themes(page: Page) -> None:
    panel = open_tab(page, "Embeddings")
    page.get_by_text("Nearest contextual neighbours in a corpus", exact=True).click()
    panel.get_by_label("My own text (below)").check()
    panel.get_by_label("Your text (for 'My own text')").fill(
        "We walked along the bank of the river. The bank lent us money. The river was cold.")
    panel.get_by_role("button", name="Build the index").click()
    expect(panel.get_by_text("Index ready").first).to_be_visible()
    panel.get_by_label("Sentence", exact=True).fill("We sat on the grassy bank of the river.")
    panel.get_by_role("button", name="Find neighbours").click()
    marked = panel.locator(".corpus-neighbours li mark").first
    expect(marked).to_be_visible()
    assert contrast(marked) >= 4.5, (page.theme, contrast(marked))  # type: ignore[attr-defined]
    no_error_toast(page)


@desktop
def test_a_failed_call_clears_what_it_would_have_replaced(page: Page) -> None:
    panel = open_tab(page, "Attention")
    heatmap = panel.locator(".attention-heatmap .attn-view").first
    expect(heatmap).to_have_attribute("data-drawn", re.compile("L3-H2"))    # the result of the test before
    panel.get_by_label("Text", exact=True).fill("")
    panel.get_by_role("button", name="Show attention").click()
    expect(page.locator(".toast-body.error").first).to_contain_text("Type a sentence")
    expect(heatmap).not_to_have_attribute("data-drawn", re.compile("."))  # the canvas emptied
    expect(panel.locator(".attention-summary").last).not_to_contain_text("Layer 3, head 2")
    close_toasts(page)


def test_tokenize_shows_the_pieces_the_model_sees(page: Page) -> None:
    panel = open_tab(page, "Tokenize")
    box = panel.get_by_label("Text", exact=True)
    box.fill("Tokenization 🤗 works")
    panel.get_by_role("button", name="Tokenize", exact=True).click()
    strip = panel.locator(".wp-strip").first
    expect(strip.locator(".wp-cont").first).to_have_text("##ization")            # a continuation, visibly
    unknown = strip.locator(".wp-unk").first
    expect(unknown).to_contain_text("[UNK]")
    expect(unknown.locator(".wp-src")).to_have_text("🤗")                        # the text it replaced
    assert "chars 13–14" in (unknown.get_attribute("title") or "")               # offsets on hover
    expect(strip.locator(".wp-special").first).to_have_text("[CLS]")
    no_error_toast(page)


# (tab, a selector its first example must draw)
TABS = [("Tokenize", ".wp-strip"), ("Embeddings", ".embeddings-dimensions .emb-view[data-drawn]"),
        ("Attention", f"{PLOT} .heatmaplayer"),
        ("Fill-mask", f"{PLOT} .barlayer"), ("QA", f"{PLOT} .barlayer, {PLOT} .scatterlayer .trace"),
        ("Why", ".why-tokens .wt")]


@pytest.mark.parametrize(("tab", "drawn"), TABS, ids=[t for t, _ in TABS])
def test_every_tab_follows_the_theme(page: Page, tab: str, drawn: str) -> None:
    panel = open_tab(page, tab)
    run_first_example(panel)
    expect(panel.locator(drawn).first).to_be_attached()
    no_error_toast(page)
    check_figures_follow_the_theme(panel, page.theme)  # type: ignore[attr-defined]
    if page.look == "phone":  # type: ignore[attr-defined]
        check_titles_fit_the_screen(panel)
    screenshot(page, tab.lower())


@desktop
def test_the_neuron_view_shows_the_numbers_of_one_row(page: Page) -> None:
    panel = open_tab(page, "Attention")
    run_first_example(panel)                              # "The cat sat on the mat because it was tired."
    expect(panel.locator(f"{PLOT} .heatmaplayer").first).to_be_attached()
    accordion = panel.get_by_text("Neuron view: the numbers behind one row of the heatmap")
    accordion.click()
    panel.get_by_label("Query token (its row of the heatmap)").click()
    page.get_by_role("option", name="3: sat", exact=True).click()       # the choices are this input's tokens
    panel.get_by_role("button", name="Show the neuron view").click()
    expect(panel.get_by_text("It looks most at").first).to_be_visible()
    expect(panel.get_by_text("query 3").first).to_be_visible()
    view = panel.locator(".neuron-canvas-view .neuron-view").first     # drawn on a canvas (neuron_view.js)
    expect(view).to_have_attribute("data-drawn", re.compile(r"-Q3-0$"))  # query 3; the layer/head the page holds
    no_error_toast(page)
    check_figures_follow_the_theme(panel, page.theme)  # type: ignore[attr-defined]
    page.wait_for_timeout(500)
    top = accordion.bounding_box()["y"] + page.evaluate("window.scrollY") - 20
    page.screenshot(path=str(ARTIFACTS / f"walk-neuron-view-{page.look}.png"), full_page=True,  # type: ignore[attr-defined]
                    clip={"x": 0, "y": top, "width": page.viewport_size["width"], "height": 1900})


def ends_stopped(status) -> None:
    """The status reaches "stopped"; if not, the failure says what the worker itself reports."""
    try:
        expect(status.locator("strong").first).to_have_text("stopped", timeout=120_000)
    except AssertionError as exc:
        worker = SERVED.get("worker")
        raise AssertionError(f"{exc}\nworker: {worker.status() if worker else None}") from None


def test_the_training_rates_step_sensibly(page: Page) -> None:
    """ArrowUp moves the learning rate by 0.00001 and the masking rate by 0.01 (a step of 1 made them 1)."""
    panel = open_tab(page, "Training")
    for label, before, after in (("Learning rate", "0.0005", "0.00051"), ("Masking rate", "0.15", "0.16")):
        box = number_box(panel, label)
        expect(box).to_have_value(before)
        box.press("ArrowUp")
        expect(box).to_have_value(after)
        assert float(box.input_value()) < 1
        box.press("ArrowDown")
        expect(box).to_have_value(before)


def record_texts(locator) -> None:
    """Keep every text ``locator`` shows from now on in ``window.__texts`` (a word shown only briefly too)."""
    locator.evaluate("""e => { window.__texts = [e.innerText];
        new MutationObserver(() => window.__texts.push(e.innerText))
            .observe(e, {subtree: true, childList: true, characterData: true}); }""")


@desktop
def test_training_states_read_right(page: Page) -> None:
    panel = open_tab(page, "Training")
    status = panel.locator(".train-status").first
    pause = panel.get_by_role("button", name="Pause", exact=True)
    steering = [panel.get_by_role("button", name=name, exact=True)
                for name in ("Pause", "Resume", "Stop", "Save checkpoint now")]
    if page.theme == "light":  # type: ignore[attr-defined]  # one run is enough; the dark walk shows its curves
        expect(status).to_contain_text("idle")
        for button in steering:                                             # no run: nothing to act on
            expect(button).to_be_disabled()
        panel.get_by_label("Steps", exact=True).fill("0")
        panel.get_by_role("button", name="Start", exact=True).click()       # refused: the status stays
        expect(page.locator(".toast-body.error").first).to_contain_text("Steps must be a whole number")
        expect(status).to_contain_text("idle")
        close_toasts(page)
        panel.get_by_label("Steps", exact=True).fill("100000")             # long enough to pause and stop
        panel.get_by_role("button", name="Start", exact=True).click()
        expect(status).to_contain_text("running", timeout=120_000)
        expect(status).to_contain_text("tokens/s", timeout=120_000)
        expect(pause).to_be_enabled()
        record_texts(status)
        pause.click()
        expect(status).to_contain_text("paused")
        texts = page.evaluate("window.__texts")
        assert any("pausing after this step" in text for text in texts), texts   # said before the worker answered
        expect(status).not_to_contain_text("ETA")
        expect(pause).to_be_disabled()
        panel.get_by_role("button", name="Resume", exact=True).click()
        expect(status).to_contain_text("running")
        panel.get_by_role("button", name="Stop", exact=True).click()
        ends_stopped(status)
        expect(status).not_to_contain_text("ETA")
        panel.get_by_role("button", name="Continue a run (resume").click()
        panel.get_by_role("button", name="Continue run", exact=True).click()    # empty: the newest stopped run
        expect(status.locator("strong").first).to_have_text("running", timeout=120_000)
        panel.get_by_role("button", name="Stop", exact=True).click()
        ends_stopped(status)
    for button in steering:                                                 # the run ended: nothing to act on
        expect(button).to_be_disabled()
    curves = panel.locator(".curves-view").first                            # drawn on canvas, in the theme's ink
    expect(curves).to_have_attribute("data-points", re.compile(r"^[1-9]\d*$"), timeout=60_000)
    expect(curves).to_have_attribute("data-draws", re.compile(r"^[1-9]\d*$"))
    check_figures_follow_the_theme(panel, page.theme)  # type: ignore[attr-defined]
    no_error_toast(page)
    screenshot(page, "training")


# Each x axis of a drawn Plotly figure: (name, range, tick format, tick suffix).
X_AXES = """el => { const l = el._fullLayout; return Object.keys(l).filter(k => /^xaxis[0-9]*$/.test(k))
    .map(k => [k, l[k].range, l[k].tickformat || "", l[k].ticksuffix || ""]); }"""


def run_example(panel, row: int) -> None:
    """Click row ``row`` (0-based) of the panel's examples (it fills the inputs and runs)."""
    panel.locator("tr.tr-body").nth(row).locator("td").first.click()


@one_look
def test_fill_mask_masks_share_one_probability_scale(page: Page) -> None:
    """Two masks' bars are drawn on one axis from 0 in percent (a 5% bar is shorter than a 40% one); the Zoom
    box gives each chart its own axis and says so."""
    panel = open_tab(page, "Fill-mask")
    run_example(panel, 3)                                       # "Paris is the [MASK] of [MASK]."
    plot = plot_in(panel, "Top-k per mask")
    expect(plot.locator(".barlayer .trace")).to_have_count(2)
    axes = plot.evaluate(X_AXES)
    assert len(axes) == 2 and axes[0][1] == axes[1][1] and axes[0][1][0] == 0, axes     # shared, from 0
    ticks = plot.locator(".xtick text").evaluate_all("els => els.map(e => e.textContent)")
    assert ticks and all(t.endswith("%") for t in ticks), ticks                         # percentages, no μ
    zoom = panel.get_by_role("checkbox", name=re.compile("^Zoom"))
    zoom.check()
    expect(plot.locator(".xtitle").first).to_contain_text("own scale")
    zoom.uncheck()
    no_error_toast(page)


def percents(text: str) -> list[float]:
    """Every percentage written in ``text``."""
    return [float(n.replace(",", "")) for n in re.findall(r"([0-9][0-9,]*(?:\.[0-9]+)?)\s*%", text)]


@one_look
def test_qa_never_shows_a_probability_over_100_percent(page: Page) -> None:
    """On the long context (several windows) every answer shows its own probability, at most 100%, and where it is
    in the text."""
    panel = open_tab(page, "QA")
    rows = panel.locator("tr.tr-body")
    run_example(panel, rows.count() - 1)                        # the long one: several doc-stride windows
    page.wait_for_timeout(1000)
    expect(panel.locator(".pending, .generating")).to_have_count(0, timeout=120_000)     # the answer is in
    expect(panel.get_by_text(re.compile(r"#1 · ")).first).to_be_visible()
    shown = panel.inner_text()
    assert percents(shown) and max(percents(shown)) <= 100, percents(shown)
    expect(panel.locator(f"{PLOT} .barlayer, {PLOT} .scatterlayer .trace").first).to_be_attached()
    no_error_toast(page)


def test_the_run_browser_overlays_two_runs(page: Page) -> None:
    """The Training tab's run browser reopens a command-line run and draws a second one over it, each in its
    own colour and legend entry."""
    panel = open_tab(page, "Training")
    page.get_by_text("Run browser: reopen any run", exact=False).first.click()
    for label, run in (("Run", "walk-a"), ("Compare with (optional)", "walk-b")):
        choose_option(page, panel.get_by_label(label, exact=True), run)    # its list may be redrawn meanwhile
    legends = panel.locator(f"{PLOT} .legendtext")
    expect(legends.filter(has_text="walk-a").first).to_be_attached(timeout=60_000)   # both, in the run browser
    expect(legends.filter(has_text="walk-b").first).to_be_attached()
    check_figures_follow_the_theme(panel, page.theme)  # type: ignore[attr-defined]
    no_error_toast(page)
