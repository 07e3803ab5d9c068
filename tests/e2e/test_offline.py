"""The app works offline, proven (issue 43): chromium opens the page with every request to a host other than
127.0.0.1 / localhost aborted and recorded (Playwright routing, web sockets too, service workers blocked), and the
test process itself, which serves the app, refuses and records every connection and name lookup off the machine.
One page visits every tab of ``explorer.tab_registry.TABS`` in order, runs what a first-time visitor runs there (its
first example; Syntax: *Score the heads* on its default input; Training, Fine-tune and Glossary: they render and
Training and Fine-tune say their status) and waits for the answer to be drawn. Then nothing was blocked on either
side, the page logged no script or console error and showed no error toast, and neither the served HTML nor the
page after the walk names an outside address for a script, a style sheet or a font."""
from __future__ import annotations

import errno
import ipaddress
import re
import socket
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, WebSocketRoute, expect
from support.browser_helpers import DESKTOP, PLOT, TIMEOUT_MS, open_tab, served_app
from support.page_watch import console_errors, page_errors, shown_toasts, watched

from explorer.tab_registry import TABS

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
EXAMPLE = "the first example"
# What a first-time visitor does on each tab (click its first example, press a button, or only look) and what must
# then be drawn in the tab: (CSS selector, text it shows or None for "is there"). A tab not named here (one added
# later) gets its first example clicked when it has one, and is only looked at otherwise.
VISIT: dict[str, tuple[str | None, list[tuple[str, str | None]]]] = {
    "tokenize": (EXAMPLE, [(".wordpieces", "[SEP]"), (".token-summary", "tokens")]),
    "embeddings": (EXAMPLE, [(".embeddings-dimensions .emb-view[data-drawn]", None),
                             (".embeddings-summary", "contextual view")]),
    "attention": (EXAMPLE, [(".attention-heatmap .attn-view[data-drawn]", None)]),
    "fill_mask": (EXAMPLE, [(f"{PLOT} .barlayer", None), (".token-summary", "Uncertainty")]),
    "heads": (EXAMPLE, [(f"{PLOT} .barlayer", None), (".token-summary", "P(IsNext)")]),
    "qa": (EXAMPLE, [(f"{PLOT} .barlayer, {PLOT} .scatterlayer .trace", None), (".token-summary", "Best answer")]),
    "why": (EXAMPLE, [(".why-tokens .wt", None), (".token-summary", "Why")]),
    "compare": (EXAMPLE, [(f"{PLOT} .heatmaplayer", None), (".token-summary", "Representations")]),
    "syntax": ("Score the heads", [(f"{PLOT} .heatmaplayer", None), (".syntax-best-heads", "det")]),
    "training": (None, [(".train-status", "idle")]),
    "finetune": (None, [(".train-status", "idle")]),
    "glossary": (None, [(".glossary", "attention")]),
}


def is_local(host: str | bytes | None) -> bool:
    """Whether ``host`` (a name or an address; None or empty: this machine) names this machine."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = (host or "").strip("[]").lower()
    if host in ("", *LOCAL_NAMES):
        return True
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def outside_here() -> Iterator[list[str]]:
    """While it runs: every TCP/UDP connection and name lookup of this process (the served app runs in it) to
    another machine is refused (as an unreachable network would) and recorded in the list it yields."""
    outside: list[str] = []
    real_connect, real_connect_ex, real_lookup = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def allowed(sock: socket.socket, address: Any) -> bool:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or is_local(address[0]):
            return True
        outside.append(f"connect to {address[0]}:{address[1]}")
        return False

    def connect(sock: socket.socket, address: Any) -> None:
        if not allowed(sock, address):
            raise OSError(errno.ENETUNREACH, "the offline test refuses connections off this machine")
        return real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        return real_connect_ex(sock, address) if allowed(sock, address) else errno.ENETUNREACH

    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_local(host):
            outside.append(f"name lookup of {host!r}")
            raise socket.gaierror(socket.EAI_NONAME, "the offline test refuses name lookups off this machine")
        return real_lookup(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        patch.setattr(socket, "getaddrinfo", lookup)
        yield outside


@pytest.fixture(scope="module")
def server_outside() -> Iterator[list[str]]:
    """What this process tried to reach off the machine (refused), from before the app is served."""
    yield from outside_here()


@pytest.fixture(scope="module")
def url(server_outside: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app on default services, served by this process while it may reach nothing off the machine."""
    with served_app(tmp_path_factory.mktemp("offline-runs")) as (address, _):
        yield address


class Offline:
    """A browser context whose requests to other hosts are aborted; ``blocked`` lists them, each with the tab
    being visited (``where``) when it was made; ``let_through`` counts the page's own."""

    def __init__(self, browser: Browser) -> None:
        self.blocked: list[str] = []
        self.let_through = 0
        self.where = "opening the page"
        self.context = browser.new_context(viewport=DESKTOP, service_workers="block")
        self.context.route("**/*", self._request)
        self.context.route_web_socket(re.compile(".*"), self._web_socket)

    def _request(self, route: Route) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or is_local(urlsplit(url).hostname):
            self.let_through += 1
            route.continue_()
        else:
            self.blocked.append(f"{self.where}: {route.request.method} {url} ({route.request.resource_type})")
            route.abort("blockedbyclient")

    def _web_socket(self, socket_route: WebSocketRoute) -> None:
        if is_local(urlsplit(socket_route.url).hostname):
            socket_route.connect_to_server()
        else:
            self.blocked.append(f"{self.where}: web socket {socket_route.url}")
            socket_route.close()


@pytest.fixture
def offline(browser: Browser) -> Iterator[Offline]:
    guard = Offline(browser)
    yield guard
    guard.context.close()


class Addresses(HTMLParser):
    """The addresses an HTML page loads scripts, style sheets, fonts and icons from, and its inline styles."""

    def __init__(self) -> None:
        super().__init__()
        self.addresses: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        address = named.get("href") if tag == "link" else named.get("src") if tag == "script" else None
        if address:
            self.addresses.append(f"<{tag}> {address}")
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


STYLE_ADDRESS = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])((?:https?:)?//[^'")\s]+)""", re.IGNORECASE)


def outside_addresses(addresses: list[str], styles: list[str]) -> list[str]:
    """The ``addresses`` ("<tag> address") and the addresses in ``styles`` (``url(...)``, ``@import``) that are
    on another machine; relative ones are the page's own."""
    found = addresses + [f"<style> {address}" for style in styles for address in STYLE_ADDRESS.findall(style)]
    return [item for item in found if re.match(r"(?:https?:)?//", item.split(" ", 1)[1], re.IGNORECASE)
            and not is_local(urlsplit(item.split(" ", 1)[1]).hostname)]


def test_the_served_page_names_no_outside_address(offline: Offline, url: str) -> None:
    """The HTML the server sends loads its scripts, styles and fonts from the app itself."""
    page = offline.context.new_page()
    response = page.goto(url)
    assert response is not None and response.ok, response
    parsed = Addresses()
    parsed.feed(response.text())
    assert any(item.startswith("<script>") for item in parsed.addresses), parsed.addresses   # the app's own
    assert outside_addresses(parsed.addresses, parsed.styles) == [], parsed.addresses
    assert offline.let_through > 0                          # the guard saw the page's requests
    assert offline.blocked == [], "\n".join(offline.blocked)


def first_visible_example(panel):
    """The first cell of the first examples row the visitor sees in ``panel``, or None when it shows none."""
    rows = panel.locator("tr.tr-body:visible")
    return rows.first.locator("td").first if rows.count() else None


def visit(page: Page, title: str, tab_id: str) -> None:
    """Open the tab ``title``, do what ``VISIT`` says for ``tab_id`` and wait until its answer is drawn."""
    panel = open_tab(page, title)
    action, drawn = VISIT.get(tab_id, (EXAMPLE, []))
    if action == EXAMPLE:
        cell = first_visible_example(panel)
        assert cell is not None or tab_id not in VISIT, f"the {title} tab shows no examples"
        if cell is not None:
            cell.click()
    elif action:
        panel.get_by_role("button", name=action, exact=True).click()
    for selector, text in drawn:
        if text is None:
            expect(panel.locator(selector).first).to_be_attached()
        else:
            expect(panel.locator(selector).filter(has_text=text).first).to_be_visible()
    expect(panel.locator(".pending, .generating")).to_have_count(0)       # every output of the answer is in


def test_every_tab_answers_with_nothing_leaving_the_machine(offline: Offline, url: str,
                                                            server_outside: list[str]) -> None:
    """Each tab's first example (or main button, or just the tab) answers offline: nothing blocked in the
    browser or in the server, no script error, no error toast, no outside address in the page's DOM after it."""
    page = watched(offline.context.new_page())
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    expect(page.locator(".model-info").last).to_contain_text("Heads:")
    for tab in TABS:
        offline.where = f"the {tab.title} tab"
        try:
            visit(page, tab.title, tab.id)
        except AssertionError as error:
            raise AssertionError(f"{offline.where}: {error}\nblocked so far: {offline.blocked}\n"
                                 f"toasts: {shown_toasts(page)}") from None
    offline.where = "after the walk"
    in_dom = page.evaluate("""() => ({
        addresses: [...document.querySelectorAll('link[href], script[src]')]
            .map(e => `<${e.tagName.toLowerCase()}> ${e.href || e.src}`),
        styles: [...document.querySelectorAll('style')].map(s => s.textContent)})""")
    toasts = shown_toasts(page)
    assert offline.blocked == [], "requests to other machines:\n" + "\n".join(offline.blocked)
    assert server_outside == [], "the server reached off the machine:\n" + "\n".join(server_outside)
    assert page_errors(page) == [], page_errors(page)
    assert console_errors(page) == [], console_errors(page)
    assert [toast for toast in toasts if "error" in toast.split(":", 1)[0]] == [], toasts
    assert outside_addresses(in_dom["addresses"], in_dom["styles"]) == [], in_dom["addresses"]
