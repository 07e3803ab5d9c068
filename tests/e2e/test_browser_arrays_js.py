"""The browser's decoder (assets/browser_arrays.js) in chromium: what Python's ``encode`` sends, the page reads
back as Python's ``decode`` does (uint8 and float16, deflated or not), and a browser without DecompressionStream
gets a sentence saying why instead of wrong numbers."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from playwright.sync_api import Browser, Page

from explorer.views import browser_arrays as browser_arrays

DECODE_ALL = """async (payload) => { const d = await window.BertArrays.decode(payload);
    return { shape: d.shape, values: Array.from({ length: d.raw.length }, (_, i) => d.get(i)) }; }"""


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(content=browser_arrays.script())
    yield page
    page.close()


def arrays() -> dict[str, tuple[np.ndarray, str]]:
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(64), size=64).astype(np.float32)           # rows of attention weights
    sparse = np.zeros((48, 48), np.float32)
    sparse[np.arange(48), rng.integers(0, 48, 48)] = 1.0                         # deflates well
    signed = rng.normal(0, 3, (32, 24)).astype(np.float32)
    return {"uint8 dense": (weights, "uint8"), "uint8 sparse": (sparse, "uint8"), "float16 signed": (signed, "float16")}


@pytest.mark.parametrize("name", list(arrays()))
@pytest.mark.parametrize("compress", [True, False])
def test_the_page_reads_what_python_reads(page: Page, name: str, compress: bool) -> None:
    values, dtype = arrays()[name]
    payload = browser_arrays.encode(values, dtype, scale=1.0 if dtype == "uint8" else None, compress=compress)
    if not compress:
        assert payload["compression"] == "none"
    read = page.evaluate(DECODE_ALL, payload)
    assert read["shape"] == list(values.shape)
    in_page = np.asarray(read["values"], np.float32).reshape(values.shape)
    np.testing.assert_array_equal(in_page, browser_arrays.decode(payload))        # the same float32 numbers
    assert np.abs(in_page - values).max() <= browser_arrays.precision(payload)     # and near the engine's


def test_a_browser_without_decompression_stream_is_told_why(browser: Browser) -> None:
    page = browser.new_page()
    try:
        page.set_content("<html><body></body></html>")
        page.add_script_tag(content="delete window.DecompressionStream;")       # as in Safari before 16.4
        page.add_script_tag(content=browser_arrays.script())
        sparse = np.zeros((64, 64), np.float32)
        sparse[:, 0] = 1.0
        payload = browser_arrays.encode(sparse, "uint8", scale=1.0)
        assert payload["compression"] == "deflate"
        message = page.evaluate("""async (p) => { try { await window.BertArrays.decode(p); return null; }
            catch (e) { return e.message; } }""", payload)
        assert message and "DecompressionStream" in message and "browser" in message
        plain = browser_arrays.encode(sparse, "uint8", scale=1.0, compress=False)     # what needs no inflating
        assert page.evaluate(DECODE_ALL, plain)["values"][0] == 1.0
    finally:
        page.close()
