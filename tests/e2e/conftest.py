"""What every real-browser test module shares: one headless chromium per module (``browser_helpers.chromium``);
for the canvas views' modules, the app served once per module on default services (``app_served``) and a page
on it in each look (``page``: light, dark, a 390-px phone) or one light desktop page (``desktop``). A module
that defines its own ``page`` fixture uses that one."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import pytest
from playwright.sync_api import Browser, Page

from explorer.services import Services
from support.browser_helpers import DESKTOP, LOOKS, chromium, opened, served_app, url_and_viewport


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless chromium for the module's pages, closed after its last test."""
    with chromium() as launched:
        yield launched


class ServedApp(NamedTuple):
    url: str
    services: Services


@pytest.fixture(scope="module")
def app_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    """The app on default services (the bundled model), served for the module's tests."""
    with served_app(tmp_path_factory.mktemp("canvas-runs")) as (url, services):
        yield ServedApp(url, services)


@pytest.fixture(params=LOOKS)
def page(request: pytest.FixtureRequest, browser: Browser, app_served: ServedApp) -> Iterator[Page]:
    """A page on the served app in one look; ``page.look`` names it."""
    with opened(browser, *url_and_viewport(app_served.url, request.param)) as page:
        page.look = request.param                               # type: ignore[attr-defined]
        yield page


@pytest.fixture
def desktop(browser: Browser, app_served: ServedApp) -> Iterator[Page]:
    """One light page at 1,360 px."""
    with opened(browser, app_served.url, DESKTOP) as page:
        yield page


@pytest.fixture
def default_model(app_served: ServedApp):
    """The served app's ``default`` model (the numbers the views must show come from it)."""
    return app_served.services.model("default")
