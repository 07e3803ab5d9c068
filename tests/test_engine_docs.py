"""docs/ENGINE.md's Python snippets run as they stand, from a folder outside the repository (issue 36): each in a
fresh process whose working folder is a temporary one, with the repository importable as `pip install -e .` makes
it (on the path, not the working folder). A result printed on the comment line under an expression
(`# [{'token_str': 'states', ...}, ...]`, `# {'answer': 'a nice puppet', ...}`) is what that expression returns:
its quoted strings and whole numbers are compared; `...` and decimals are left out."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGINE_MD = ROOT / "docs" / "ENGINE.md"

# Runs the snippet read from stdin statement by statement; an expression followed by a result comment is checked.
RUNNER = r'''
import ast, re, sys
source = sys.stdin.read()
lines = source.splitlines()
checked = 0
for node in ast.parse(source).body:
    code = compile(ast.Module([node], []), "<ENGINE.md>", "exec")
    shown = lines[node.end_lineno].strip() if node.end_lineno < len(lines) else ""
    if not (isinstance(node, ast.Expr) and re.match(r"# [\[{]", shown)):
        exec(code, globals())
        continue
    value = eval(compile(ast.Expression(node.value), "<ENGINE.md>", "eval"), globals())
    first = value[0] if isinstance(value, list) else value
    pairs = re.findall(r"'(\w+)': ('[^']*'|-?\d+)(?![\d.])", shown)
    assert pairs, shown
    for key, literal in pairs:
        assert repr(first[key]) == literal, f"line {node.lineno}: {key} is {first[key]!r}, the doc says {literal}"
        checked += 1
print("checked", checked)
'''


def python_snippets() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", ENGINE_MD.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_engine_md_has_its_snippets() -> None:
    snippets = python_snippets()
    assert len(snippets) >= 3
    assert "pip install -e ." in ENGINE_MD.read_text(encoding="utf-8")


@pytest.mark.parametrize("number", range(len(python_snippets())), ids=lambda n: f"snippet-{n + 1}")
def test_each_engine_md_snippet_runs_from_outside_the_repository(number: int, tmp_path: Path) -> None:
    snippet = python_snippets()[number]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "BERT_ENGINE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", RUNNER], input=snippet, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, f"ENGINE.md snippet {number + 1} failed:\n{done.stderr[-3000:]}"
    assert not (tmp_path / "assets").exists()                          # nothing found by a relative path
    if "# [{" in snippet or "# {" in snippet:
        assert int(done.stdout.split("checked")[-1]) >= 4, done.stdout
