"""The e2e tests' browser finder: PATH first (in ``BROWSER_NAMES`` order), then Playwright's own chromium, and
a failure (not a skip) that names what was tried and how to install one. PATH is a folder of this test's own
executables; no browser is started or downloaded."""
from __future__ import annotations

from pathlib import Path

import pytest

from support import browser_helpers
from support.browser_helpers import BROWSER_NAMES, INSTALL_COMMANDS, find_browser, no_browser_message


def executable(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder that is the whole PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


@pytest.mark.parametrize("name", BROWSER_NAMES)
def test_each_name_is_found_on_path(bin_dir: Path, name: str) -> None:
    path = executable(bin_dir, name)
    assert find_browser(None) == str(path)


def test_path_goes_in_the_names_order_and_before_playwrights_own(bin_dir: Path, tmp_path: Path) -> None:
    own = executable(tmp_path, "chrome")
    executable(bin_dir, "google-chrome-stable")
    assert find_browser(str(own)) == str(bin_dir / "google-chrome-stable")
    executable(bin_dir, "chromium-browser")
    assert find_browser(str(own)) == str(bin_dir / "chromium-browser")
    executable(bin_dir, "chromium")
    assert find_browser(str(own)) == str(bin_dir / "chromium")


def test_a_file_that_is_not_executable_is_not_a_browser(bin_dir: Path) -> None:
    (bin_dir / "chromium").write_text("", encoding="utf-8")      # shutil.which wants the executable bit
    assert find_browser(None) is None


def test_playwrights_own_chromium_when_path_has_none(bin_dir: Path, tmp_path: Path) -> None:
    own = executable(tmp_path, "chrome")
    assert find_browser(str(own)) == str(own)
    assert find_browser(str(tmp_path / "not-installed" / "chrome")) is None
    assert find_browser(None) is None


def test_which_is_asked_for_every_name_in_order() -> None:
    asked: list[str] = []
    assert find_browser(None, which=lambda name: asked.append(name)) is None
    assert asked == list(BROWSER_NAMES)


def test_the_message_names_what_was_tried_and_how_to_install(bin_dir: Path) -> None:
    message = no_browser_message("/root/.cache/ms-playwright/chromium-1/chrome-linux64/chrome")
    assert all(name in message for name in BROWSER_NAMES) and f"PATH={bin_dir}" in message
    assert "/root/.cache/ms-playwright/chromium-1/chrome-linux64/chrome" in message
    assert all(f"`{command}`" in message for command in INSTALL_COMMANDS)


def test_no_browser_fails_the_test_not_skips_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``chromium()`` with nothing found raises pytest's failure (a skip would be ``pytest.skip.Exception``)."""
    monkeypatch.setattr(browser_helpers, "find_browser", lambda own: None)
    with pytest.raises(pytest.fail.Exception, match="No chromium for the real-browser tests") as failed:
        with browser_helpers.chromium():
            pass
    assert not isinstance(failed.value, pytest.skip.Exception)
