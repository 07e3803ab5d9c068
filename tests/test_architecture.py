"""The layout rules of docs/ARCHITECTURE.md, checked on the source: engine/ is a library (no Gradio, no
app settings, no UI text), no import cycles between modules, and no module grows past what one reads at once."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "explorer", "deploy")
MAX_LINES = 400
MAX_FUNCTION_LINES = 60


def modules(package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


ALL = {name: path for package in PACKAGES for name, path in modules(package).items()}


def imported(name: str, path: Path) -> set[str]:
    """Every project module ``name`` imports (top-level, lazy and TYPE_CHECKING imports alike)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in ALL:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)   # a package's own __init__ is not an edge of its modules
    return found


GRAPH = {name: imported(name, path) for name, path in ALL.items()}


def test_no_import_cycles():
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_engine_is_a_library():
    """No Gradio, no explorer and no app settings (EXPLORER_*) in engine/; the explorer passes settings in."""
    for name, path in ALL.items():
        if not name.startswith("engine"):
            continue
        assert not any(t.startswith("explorer") for t in GRAPH[name]), f"{name} imports the explorer"
        source = path.read_text(encoding="utf-8")
        assert "import gradio" not in source and "from gradio" not in source, f"{name} imports gradio"
        assert "EXPLORER_" not in source, f"{name} reads an app setting (EXPLORER_*)"


@pytest.mark.parametrize("name", sorted(ALL))
def test_module_size(name):
    lines = len(ALL[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{ALL[name].relative_to(ROOT)} has {lines} lines (at most {MAX_LINES})"


def long_functions(tree: ast.AST, limit: int = MAX_FUNCTION_LINES) -> list[tuple[int, str, int]]:
    """``(line, name, length)`` of each function (nested ones too) longer than ``limit`` lines."""
    return [(node.lineno, node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def test_no_function_in_the_explorer_is_longer_than_60_lines():
    """No function in explorer/ spans more than 60 lines, counted from its ``def`` line to its last line
    (``end_lineno - lineno + 1``: the signature, the docstring, comments and blank lines included; decorators
    not). A function that holds a nested one counts the nested lines too. A tab's ``build`` creates its widgets
    with one function per section and wires them at the end; its handlers come from small factories."""
    found = [f"{path.relative_to(ROOT)}:{line} {function} ({length} lines)" for name, path in ALL.items()
             if name.startswith("explorer")
             for line, function, length in long_functions(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines: " + "; ".join(found)


def test_the_length_check_counts_the_docstring_and_nested_functions():
    source = "def outer():\n    \"\"\"Doc.\"\"\"\n    def inner():\n        pass\n    return inner\n"
    assert long_functions(ast.parse(source), limit=4) == [(1, "outer", 5)]
    assert long_functions(ast.parse(source), limit=5) == []


def test_only_the_run_folder_knows_the_layout_of_a_run():
    """No ``.parent.parent`` climbing from a checkpoint to its run outside engine/training/jobs/run_folder.py."""
    found = [f"{name}:{number}" for name, path in ALL.items() if name != "engine.training.jobs.run_folder"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ".parent.parent" in line and "__file__" not in line]
    assert not found, "path arithmetic on run folders: " + ", ".join(found)


def assigned_functions(tree: ast.AST) -> list[tuple[int, str]]:
    """``x.attr = f`` where ``f`` is a function (a lambda, or a name the module defines with ``def``) and
    ``x`` is not ``self`` / ``cls``: code that replaces another object's method."""
    functions = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def is_function(value: ast.AST) -> bool:
        return isinstance(value, ast.Lambda) or (isinstance(value, ast.Name) and value.id in functions)

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                     and isinstance(node.value, ast.Tuple) else [(target, node.value)])
            for left, right in pairs:
                if (isinstance(left, ast.Attribute) and is_function(right)
                        and not (isinstance(left.value, ast.Name) and left.value.id in ("self", "cls"))):
                    found.append((node.lineno, ast.unparse(left)))
    return found


def test_no_method_is_assigned_over_from_outside_its_class():
    """Nothing in engine/ replaces another object's method (``trainer.step = locked_step``): the trainer
    calls out through callbacks instead (docs/design/training.md)."""
    found = [f"{name}:{line} assigns {target}" for name, path in ALL.items() if name.startswith("engine")
             for line, target in assigned_functions(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, "; ".join(found)


def test_the_method_check_catches_what_the_worker_used_to_do():
    old = ast.parse("def wrap(trainer, dataset):\n    def locked_step(): pass\n    def locked_evaluate(): pass\n"
                    "    def batch(e, i): pass\n    trainer.step, trainer.evaluate = locked_step, locked_evaluate\n"
                    "    dataset.batch = batch\n    self.ok = batch\n    run.hook = lambda: 1\n")
    assert [target for _, target in assigned_functions(old)] == ["trainer.step", "trainer.evaluate", "dataset.batch",
                                                                 "run.hook"]


# --- issue 25: one home per head, task, run state and tab ---------------------------------------------------------

SOURCE_ROOTS = ("engine", "explorer", "deploy", "bench", "scripts")


def source_files() -> list[Path]:
    """Every Python source file of the product and its tools (not tests)."""
    files = [ROOT / "app.py"]
    for folder in SOURCE_ROOTS:
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def string_literals(path: Path) -> set[str]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings}


def test_engine_training_is_sub_packages():
    """engine/training/ holds sub-packages (loop, jobs, tasks, worker) and no loose module but its __init__."""
    loose = [p.name for p in (ROOT / "engine" / "training").glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"modules outside engine/training's sub-packages: {loose}"
    assert {p.name for p in (ROOT / "engine" / "training").iterdir() if (p / "__init__.py").is_file()} >= {
        "loop", "jobs", "tasks", "worker"}


def test_no_re_export_shims():
    """A name lives where it is defined: no ``import ...  # noqa: F401 (re-exported)`` lines that keep an old
    import path alive (the importers import from the defining module)."""
    found = [f"{path.relative_to(ROOT)}:{number}" for path in source_files()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if "noqa: F401" in line or "re-exported" in line]
    assert not found, "re-export shims: " + ", ".join(found)


def test_run_states_are_named_in_one_module():
    """``RunState`` is the only place that spells a run's states; everything else uses the enum."""
    from engine.training.worker.run_state import RunState

    home = ROOT / "engine" / "training" / "worker" / "run_state.py"
    named = {"preparing", "running", "paused", "stopping"}     # the active states; "failed" etc. are common words
    assert named <= {state.value for state in RunState}
    found = [f"{path.relative_to(ROOT)}: {sorted(string_literals(path) & named)}" for path in source_files()
             if path != home and path.parts[len(ROOT.parts)] in ("engine", "explorer")
             and string_literals(path) & named]
    assert not found, "run states spelled outside run_state.py: " + "; ".join(found)


def test_each_task_name_is_spelled_in_at_most_three_source_files():
    """A training task's name as a string lives in its own module, its registry line and at most one more.
    (``qa`` and ``multiple_choice`` also name a head, whose spec and callers spell it: those are checked as heads
    are, by the registry tests, not here.)"""
    from engine.model.head_specs import HEADS
    from engine.training.tasks.registry import TASKS

    for name in (task for task in TASKS if task not in HEADS):
        files = [str(path.relative_to(ROOT)) for path in source_files() if name in string_literals(path)]
        assert len(files) <= 3, f"{name!r} is spelled in {len(files)} source files: {files}"


def test_test_support_modules_live_in_tests_support():
    """tests/ holds test files and conftest.py; what tests share is a module of the ``tests/support`` package."""
    loose = [p.name for p in (ROOT / "tests").glob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py"]
    assert not loose, f"support modules loose in tests/: {loose} (move them to tests/support/)"
    for folder in (p for p in (ROOT / "tests").rglob("*") if p.is_dir() and p.name not in ("support", "__pycache__")
                   and "support" not in p.parts):
        stray = [p.name for p in folder.glob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py"]
        assert not stray, f"support modules in {folder.relative_to(ROOT)}: {stray}"
