"""A late answer on purpose: the page's requests for one endpoint held in the browser (Playwright routing on
Gradio's ``/queue/join``) until the test releases them, so the server answers after whatever the user did in
between (docs/design/browser-views.md, *Late answers*)."""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from playwright.sync_api import Page, Route, expect


def fn_indices(page: Page, api_name: str) -> set[int]:
    """The page's dependency ids (``fn_index``) whose endpoint is ``api_name``."""
    config = page.evaluate("() => window.gradio_config")
    found = {d["id"] for d in config["dependencies"] if d.get("api_name") == api_name}
    assert found, f"the page has no endpoint {api_name!r}"
    return found


class Held:
    """The requests held so far: :meth:`wait` for one, :meth:`release` lets every one go on to the server."""

    def __init__(self, page: Page) -> None:
        self.page, self.routes, self.releasing = page, [], False

    def wait(self, count: int = 1) -> None:
        """Until ``count`` requests are held (the page asked), processing Playwright's events meanwhile."""
        for _ in range(600):
            if len(self.routes) >= count:
                return
            self.page.wait_for_timeout(100)
        raise AssertionError(f"{len(self.routes)} requests held, not {count}")

    def release(self) -> None:
        self.releasing = True
        for route in self.routes:
            route.continue_()


@contextlib.contextmanager
def held(page: Page, api_name: str) -> Iterator[Held]:
    """Hold the page's requests to ``api_name`` (every other request passes) until ``release``; after the block
    every request passes again and none stays held."""
    wanted, holder = fn_indices(page, api_name), Held(page)

    def route(request_route: Route) -> None:
        body = request_route.request.post_data or "{}"
        if not holder.releasing and json.loads(body).get("fn_index") in wanted:
            holder.routes.append(request_route)
        else:
            request_route.continue_()

    page.route("**/queue/join*", route)
    try:
        yield holder
    finally:
        if not holder.releasing:
            holder.release()
        page.unroute("**/queue/join*", route)


def answers(root) -> int:
    """How many answers a canvas view has taken (its root's ``data-answers``; 0 before the first)."""
    return int(root.get_attribute("data-answers") or 0)


def expect_answers(root, count: int) -> None:
    """Until the view has taken ``count`` answers."""
    expect(root).to_have_attribute("data-answers", str(count))
