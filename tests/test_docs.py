"""docs/ARCHITECTURE.md stays a short map and the design notes hang off it: the map has at most 320 lines,
every page of docs/design/ is linked from the map and listed in docs/design/README.md, and the notes hold
current facts, not project history (issue numbers belong in the git log). Links and anchors themselves are
checked by tests/test_readme.py."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "ARCHITECTURE.md"
DESIGN = ROOT / "docs" / "design"
MAX_MAP_LINES = 320


def linked_files(path: Path) -> set[Path]:
    """The files that ``path``'s Markdown links point to, resolved (anchors dropped)."""
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)", path.read_text(encoding="utf-8"))
    return {(path.parent / target).resolve() for target in targets if not re.match(r"[a-z][a-z0-9+.-]*:", target)}


def design_pages() -> list[Path]:
    return sorted(DESIGN.glob("*.md"))


def test_the_map_is_at_most_320_lines() -> None:
    lines = len(MAP.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MAP_LINES, (f"docs/ARCHITECTURE.md has {lines} lines, more than {MAX_MAP_LINES}: put the rule "
                                    "into its docs/design/<topic>.md and leave one line with a link in the map")


def test_there_are_design_pages_and_the_map_links_every_one() -> None:
    pages = design_pages()
    assert len(pages) >= 10 and DESIGN / "README.md" in pages, [p.name for p in pages]
    missing = [page.name for page in pages if page.resolve() not in linked_files(MAP)]
    assert not missing, f"docs/ARCHITECTURE.md links no docs/design/ page named {missing}"


def test_the_design_index_lists_every_page() -> None:
    listed = linked_files(DESIGN / "README.md")
    missing = [page.name for page in design_pages() if page.name != "README.md" and page.resolve() not in listed]
    assert not missing, f"docs/design/README.md does not list {missing}"


def test_each_design_page_has_one_title_and_no_project_history() -> None:
    for page in [MAP, *design_pages()]:
        text = page.read_text(encoding="utf-8")
        titles = re.findall(r"^# .+$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M), flags=re.M)
        assert len(titles) == 1, (page.name, titles)
        history = re.findall(r"\b(?:issue|session) \d+\b|\buntil issue\b|\bused to be\b", text, flags=re.I)
        assert not history, (page.name, history)


def package_table() -> str:
    """The map's `| package | modules |` table, as text."""
    text = MAP.read_text(encoding="utf-8")
    start = text.index("| package | modules |")
    return text[start:text.index("\n\n", start)]


def test_the_package_table_names_every_module_and_only_modules_that_exist() -> None:
    table = package_table()
    named = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*\.py)\b", table))
    modules = [p for top in ("engine", "explorer", "deploy") for p in (ROOT / top).rglob("*.py")
               if "__pycache__" not in p.parts and p.name not in ("__init__.py", "__main__.py")]
    missing = sorted({str(p.relative_to(ROOT)) for p in modules if p.name not in named})
    assert not missing, f"docs/ARCHITECTURE.md's package table names no {missing}"
    existing = {p.name for p in modules} | {"__init__.py", "app.py"}
    stale = sorted(named - existing)
    assert not stale, f"docs/ARCHITECTURE.md's package table names modules that do not exist: {stale}"
