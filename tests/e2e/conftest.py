"""What every real-browser test module shares: one headless chromium per module (``browser_helpers.chromium``)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from support.browser_helpers import chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless chromium for the module's pages, closed after its last test."""
    with chromium() as launched:
        yield launched
