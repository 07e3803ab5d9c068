"""The README stays a newcomer's page: at most 250 lines, its two set-up commands are the ones that work (the
run command, and exactly `.ci/run`'s test command), it names every tab, and no relative link or image in it or
in the docs points to a file or a section that does not exist (GitHub's heading anchors)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer.tab_registry import TABS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250
DOCS = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "design").glob("*.md"))]


def text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text under the level-2 ``heading``, up to the next level-2 heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def pins() -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", text_of(ROOT / "requirements.txt"), re.MULTILINE))


def ci_command() -> str:
    """The one command `.ci/run` runs (after its shebang, comments, `set` and `cd` lines)."""
    lines = [line.strip() for line in text_of(ROOT / ".ci" / "run").splitlines()]
    commands = [line for line in lines if line and not line.startswith(("#", "set ", "cd "))]
    assert len(commands) == 1, commands
    return commands[0]


def test_the_readme_is_at_most_250_lines() -> None:
    lines = len(text_of(README).splitlines())
    assert lines <= MAX_LINES, (f"README.md has {lines} lines, more than {MAX_LINES}: move detail to docs/ "
                                "(TABS.md, API.md, ENGINE.md, BENCHMARKS.md, TESTING.md) and link it")


def test_the_two_set_up_commands_are_the_run_command_and_the_ci_command() -> None:
    """Both make and use a venv (Debian's Python refuses a bare pip); the run command takes torch's CPU wheel
    from PyTorch's index, the CI command plain torch (CI's registries serve the CPU wheel; PyTorch's index does
    not resolve there). `scripts/check_setup.sh` runs the run command's install in a fresh clone."""
    blocks = re.findall(r"```bash\n(.*?)```", section(text_of(README), "Set up (Python 3.11)"), flags=re.S)
    venv = "python3 -m venv .venv && . .venv/bin/activate"
    assert [block.strip() for block in blocks] == [
        f"{venv} && pip install torch=={pins()['torch']} --index-url https://download.pytorch.org/whl/cpu"
        " && pip install -r requirements.txt && python app.py",
        ci_command(),
    ]
    assert f"python3-venv && {venv} && pip install torch=={pins()['torch']} && " in ci_command()
    assert (ROOT / "app.py").is_file() and (ROOT / "requirements-test.txt").is_file()


def test_the_readme_and_docs_tabs_name_every_tab_of_the_app() -> None:
    """Every tab that ``build_app`` opens (``explorer.tab_registry.TABS``) has a line in the README's tab list
    and a row in docs/TABS.md."""
    names = [tab.title for tab in TABS]
    assert len(names) >= 9, names
    tabs = section(text_of(README), "The tabs")
    table = text_of(ROOT / "docs" / "TABS.md")
    assert not [name for name in names if f"**{name}**" not in tabs], "README 'The tabs' lacks a tab"
    assert not [name for name in names if f"\n| {name} |" not in table], "docs/TABS.md lacks a tab's row"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())     # a link keeps its text
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", strip_code(text_of(path)), flags=re.M):
        anchor, n = github_anchor(heading), 1
        while anchor in found:                    # GitHub numbers repeated headings: name, name-1, ...
            anchor = f"{github_anchor(heading)}-{n}"
            n += 1
        found.add(anchor)
    return found


def strip_code(text: str) -> str:
    """The text without fenced code blocks and inline code (their brackets are not links)."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))


def relative_links(path: Path) -> list[str]:
    targets = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", strip_code(text_of(path)))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]      # no http:, https:, mailto:


def test_the_anchor_rule_matches_github() -> None:
    assert github_anchor("Set up (Python 3.11)") == "set-up-python-311"
    assert github_anchor("Comparing two models: the Compare tab") == "comparing-two-models-the-compare-tab"
    assert github_anchor("bf16 on the CPU") == "bf16-on-the-cpu"
    assert github_anchor("How to add …") == "how-to-add-"
    assert github_anchor("The `*_over_training` endpoints") == "the-_over_training-endpoints"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_and_image_points_to_something_that_exists(path: Path) -> None:
    links = relative_links(path)
    broken = []
    for link in links:
        target, _, fragment = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            broken.append(f"{link} (no such file)")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{link} (no heading with that anchor in {file.relative_to(ROOT)})")
    assert not broken, f"{path.relative_to(ROOT)}: {broken}"
    if path == README:
        assert any(link.startswith("assets/screenshots/") for link in links)


@pytest.mark.parametrize("path", [ROOT / "README.md", ROOT / "docs" / "API.md"])
def test_the_api_examples_printed_output_is_what_the_app_returns(path: Path) -> None:
    """The comments after ``print(...)`` in the API example: /fill_mask's top word and every key /answer
    returns (the pipeline's four and the three the app adds), measured with the bundled model."""
    from engine.checkpoints.hf_format import load
    from engine.probes import inference
    from explorer.qa.tab import pipeline_json

    text = text_of(path)
    loaded = load("default")
    fill = re.search(r'client\.predict\(text="([^"]+)", api_name="/fill_mask"\)\nprint\(predictions\[0\]\["token_str"\]\)'
                     r"\s+# (\w+)", text)
    assert fill, "the /fill_mask example prints no top word"
    assert inference.fill_mask(loaded, fill.group(1), 1)[0]["token_str"] == fill.group(2)
    ask = re.search(r'question="([^"]+)", context="([^"]+)", api_name="/answer"\)\nprint\(answers\)\s+# (\{.*\})', text)
    assert ask, "the /answer example prints no answer"
    returned = pipeline_json(inference.answer_details(loaded, ask.group(1), ask.group(2)))
    assert set(re.findall(r"'(\w+)':", ask.group(3))) == set(returned)
    assert f"'answer': '{returned['answer']}'" in ask.group(3)


def test_the_deploy_section_names_every_path_a_space_gets() -> None:
    from deploy.files import ALLOW_PATTERNS

    deploy = section(text_of(ROOT / "README.md"), "Deploy to a Hugging Face Space")
    names = [p.removesuffix("*") for p in ALLOW_PATTERNS]
    missing = [n for n in names if f"`{n}`" not in deploy and not (n == "README.md" and "this README" in deploy)]
    assert not missing, f"README's deploy section does not name {missing}"
