"""The layout rules of docs/ARCHITECTURE.md, checked on the source: engine/ is a library (no Gradio, no
app settings, no UI text), no import cycles between modules, and no module grows past what one reads at once."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "explorer", "deploy")
MAX_LINES = 360
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
    """Every project module ``name`` imports (top-level, lazy and TYPE_CHECKING imports alike), with the packages
    whose ``__init__`` that import runs: importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, so
    ``name`` depends on them too, except on the packages ``name`` itself lies in (they are being imported
    already when ``name`` is)."""
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
            while target:           # the module, then each package above it whose __init__ runs first
                if target in ALL and target != name and not name.startswith(target + "."):
                    found.add(target)   # a package's own __init__ is not an edge of its modules
                target = target.rpartition(".")[0]
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


def test_the_cycle_check_counts_lazy_imports_and_package_inits(tmp_path):
    """The cycle it missed: ``loop/config.py`` imported ``tasks.registry`` inside a function, and importing that
    runs ``tasks/__init__``, which imported ``loop/config``."""
    old = tmp_path / "config.py"
    old.write_text("def validate(self):\n    from engine.training.tasks.registry import task_definition\n")
    edges = imported("engine.training.loop.config", old)
    assert {"engine.training.tasks.registry", "engine.training.tasks"} <= edges
    assert "engine.training.loop.config" in GRAPH["engine.training.tasks"]      # so that would be a cycle


# engine/training's sub-packages, in the one direction they import: each imports only those before it. What is on
# disk (runs) knows no trainer; the trainer (loop) trains a TrainingTask object it is handed and knows no task by
# name; the tasks (tasks) implement that contract and own the JobSpec their data builders read; a job (jobs) turns
# a spec into a trainer with its task; the app's worker (worker) runs jobs.
TRAINING_ORDER = ("runs", "loop", "tasks", "jobs", "worker")


def training_package(module: str) -> str | None:
    """The engine/training sub-package ``module`` lies in (``loop`` for ``engine.training.loop.trainer``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["engine", "training"] else None


def order_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every edge of ``graph`` from an engine/training sub-package to one after it in ``TRAINING_ORDER``."""
    found = []
    for name, targets in sorted(graph.items()):
        here = training_package(name)
        for target in sorted(targets):
            there = training_package(target)
            if here and there and TRAINING_ORDER.index(there) > TRAINING_ORDER.index(here):
                found.append(f"{name} -> {target}")
    return found


def test_engine_training_imports_in_one_direction():
    """runs < loop < tasks < jobs < worker: every import between engine/training's sub-packages (top-level, lazy,
    TYPE_CHECKING, and the package ``__init__`` an import runs) goes from a later package to an earlier one."""
    present = {p.name for p in (ROOT / "engine" / "training").iterdir() if (p / "__init__.py").is_file()}
    assert present == set(TRAINING_ORDER), f"sub-packages not in TRAINING_ORDER: {sorted(present ^ set(TRAINING_ORDER))}"
    wrong = order_violations(GRAPH)
    assert not wrong, "imports against runs < loop < tasks < jobs < worker: " + "; ".join(wrong)


def test_the_order_check_sees_lazy_and_type_checking_imports(tmp_path):
    source = tmp_path / "trainer.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine.training.jobs.setup import x\n"
                      "def f():\n    from engine.training.tasks import task_for\n")
    graph = {"engine.training.loop.trainer": imported("engine.training.loop.trainer", source)}
    assert order_violations(graph) == ["engine.training.loop.trainer -> engine.training.jobs",
                                       "engine.training.loop.trainer -> engine.training.jobs.setup",
                                       "engine.training.loop.trainer -> engine.training.tasks"]


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
    """No ``.parent.parent`` climbing from a checkpoint to its run outside engine/training/runs/run_folder.py."""
    found = [f"{name}:{number}" for name, path in ALL.items() if name != "engine.training.runs.run_folder"
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
    """engine/training/ holds sub-packages (runs, loop, tasks, jobs, worker) and no loose module but its __init__."""
    loose = [p.name for p in (ROOT / "engine" / "training").glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"modules outside engine/training's sub-packages: {loose}"
    assert {p.name for p in (ROOT / "engine" / "training").iterdir() if (p / "__init__.py").is_file()} >= {
        "runs", "loop", "jobs", "tasks", "worker"}


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


def test_model_key_prefixes_are_spelled_in_one_module():
    """Only ``explorer/models/keys.py`` knows how a model key is spelled: no other module holds ``checkpoint:``,
    ``local:`` or ``hub:`` in a string (docstrings may show keys; a label with a space after the colon, "hub: x",
    is no key). The engine cannot import the explorer, so its loader's label for a hub model, ``hub:<id>``
    (``engine/checkpoints/hf_format.py``), is the one other spelling."""
    import re

    from explorer.models.keys import PREFIXED, SEPARATOR, ModelKey

    spelled = re.compile(rf"(?<![\w-])(?:{'|'.join(PREFIXED)}){re.escape(SEPARATOR)}(?!\s)")
    assert all(spelled.search(str(ModelKey(kind, "x/y"))) for kind in PREFIXED)        # the check sees every key
    assert not spelled.search("Default model (hub: owner/name)") and not spelled.search("github:owner/name")
    allowed = {ROOT / "explorer" / "model_key.py", ROOT / "engine" / "checkpoints" / "hf_format.py"}
    found = [f"{path.relative_to(ROOT)}: {sorted(s for s in string_literals(path) if spelled.search(s))}"
             for path in source_files() if path not in allowed and any(spelled.search(s) for s in string_literals(path))]
    assert not found, "model-key prefixes spelled outside explorer/models/keys.py: " + "; ".join(found)


def test_each_task_name_is_spelled_in_at_most_three_source_files():
    """A training task's name as a string lives in its own module, its registry line and at most one more.
    (``qa`` and ``multiple_choice`` also name a head, whose spec and callers spell it: those are checked as heads
    are, by the registry tests, not here.)"""
    from engine.model.head_specs import HEADS
    from engine.training.tasks.registry import TRAINING_TASKS

    for name in (task for task in TRAINING_TASKS if task not in HEADS):
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


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


TAB_PACKAGES = sorted(f"explorer.{p.parent.name}" for p in (ROOT / "explorer").glob("*/tab.py"))


def test_no_tab_package_imports_another():
    """A tab shares through the explorer's common modules (``explorer.plots``' colours, ``explorer.layer_numbers``,
    ``explorer.models.description``, ``explorer.runs``' run UI), never by importing another tab's package; the
    shared ones import no tab (the entry points that assemble tabs do: the page, the tab registry and the
    notebook API, which draws the Attention and Embeddings tabs' views)."""
    assert len(TAB_PACKAGES) >= 10 and "explorer.runs" not in TAB_PACKAGES
    found = [f"{name} -> {target}" for name in GRAPH for target in GRAPH[name] for mine in TAB_PACKAGES
             for other in TAB_PACKAGES if other != mine and _inside(name, mine) and _inside(target, other)]
    found += [f"{name} -> {target}" for name in GRAPH if not any(_inside(name, tab) for tab in TAB_PACKAGES)
              and name.startswith("explorer.") and name not in ("explorer.page", "explorer.tab_registry",
                                                                "explorer.notebook")   # assemble tabs' views
              for target in GRAPH[name] if any(_inside(target, tab) for tab in TAB_PACKAGES)]
    assert not found, "tab packages import each other (share through a common module): " + "; ".join(found)


def test_the_explorer_top_level_is_a_map():
    """explorer/ holds its tab packages, a few shared packages (models, serving, views, runs) and at most 14 loose
    modules: the page, the registry of tabs, the services and what every tab shares."""
    loose = sorted(p.name for p in (ROOT / "explorer").glob("*.py"))
    assert len(loose) <= 14, f"{len(loose)} modules at explorer/'s top level: group them by role: {loose}"


def test_the_explorer_package_holds_no_code():
    """explorer/__init__.py is a docstring at most (the page is explorer.page), so importing any explorer module,
    a pure figure builder included, imports no Gradio on the way."""
    tree = ast.parse((ROOT / "explorer" / "__init__.py").read_text(encoding="utf-8"))
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) \
        and isinstance(tree.body[0].value, ast.Constant) and isinstance(tree.body[0].value.value, str) else tree.body
    assert not body, f"explorer/__init__.py holds code (line {body[0].lineno}): keep it a docstring"


# Run in a fresh interpreter: ``import gradio`` (or any gradio.* module) raises ImportError, then each module named
# on the command line is imported.
WITHOUT_GRADIO = """
import importlib, sys
class NoGradio:
    def find_spec(self, name, path=None, target=None):
        if name == "gradio" or name.startswith("gradio."):
            raise ImportError(f"no {name} here (this check runs without Gradio)")
        return None
sys.meta_path.insert(0, NoGradio())
for name in sys.argv[1:]:
    importlib.import_module(name)
assert not any(m == "gradio" or m.startswith("gradio.") for m in sys.modules), "gradio was imported"
print("imported", len(sys.argv) - 1)
"""


def test_every_figure_builder_imports_without_gradio():
    """``explorer/plots.py`` and every ``explorer/*/plots.py`` (pure builders) import in a process where importing
    Gradio fails, and the check itself fails when a module does import Gradio."""
    import subprocess
    import sys

    builders = sorted(name for name, path in ALL.items() if name.startswith("explorer") and path.name == "plots.py")
    assert {"explorer.plots", "explorer.fill_mask.plots", "explorer.runs.plots"} <= set(builders)

    def run(*names: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", WITHOUT_GRADIO, *names], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    done = run(*builders)
    assert done.returncode == 0 and done.stdout.strip() == f"imported {len(builders)}", done.stderr[-2000:]
    refused = run("explorer.page")
    assert refused.returncode != 0 and "this check runs without Gradio" in refused.stderr
