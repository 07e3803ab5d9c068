"""``explorer.page`` reads its script from ``assets/page.js`` (package data) with a size cap: the file as written, a
larger file refused before it is read whole, a missing one an error, not an empty script."""
from __future__ import annotations

from pathlib import Path

import pytest

from explorer import page

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_script_is_the_bundled_file() -> None:
    script = (ROOT / "assets" / "page.js").read_text(encoding="utf-8")
    assert page.JS == script and script.lstrip().startswith("() => {")
    assert len(script.encode("utf-8")) < page.PAGE_JS_MAX_BYTES


def test_an_asset_over_the_cap_or_missing_is_refused(tmp_path: Path) -> None:
    asset = tmp_path / "page.js"
    asset.write_text("() => { return []; }\n", encoding="utf-8")
    assert page.read_asset(asset, 100) == "() => { return []; }\n"
    asset.write_bytes(b"x" * 101)
    assert page.read_asset(asset, 101) == "x" * 101
    with pytest.raises(ValueError, match="over 100 bytes"):
        page.read_asset(asset, 100)
    with pytest.raises(FileNotFoundError):
        page.read_asset(tmp_path / "gone.js", 100)
