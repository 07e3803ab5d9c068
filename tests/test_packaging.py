"""pyproject.toml agrees with the requirements files a Space installs from, names the console script
``python app.py`` runs, and ships every file the app reads from assets/."""
from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import app

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def _pins(lines: list[str]) -> dict[str, str]:
    """``{normalised name: version}`` of ``name==version`` lines; anything else is an error."""
    pins = {}
    for line in lines:
        match = PIN.match(line.strip())
        assert match, f"not an exact pin: {line!r}"
        pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def _requirements(name: str) -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / name).read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("-r ")]


def test_dependencies_are_the_requirements_pins() -> None:
    project = PYPROJECT["project"]
    assert _pins(project["dependencies"]) == _pins(_requirements("requirements.txt"))
    assert _pins(project["optional-dependencies"]["test"]) == _pins(_requirements("requirements-test.txt"))
    assert "-r requirements.txt" in (ROOT / "requirements-test.txt").read_text(encoding="utf-8")
    assert _pins(project["optional-dependencies"]["logging"]) == {"tensorboard": "2.20.0"}


def test_metadata_and_the_console_script() -> None:
    project = PYPROJECT["project"]
    assert project["name"] == "bert-explorer" and project["requires-python"] == ">=3.11"
    assert project["license"] == "Apache-2.0" and (ROOT / project["readme"]).is_file() and project["version"]
    assert project["scripts"] == {"bert-explorer": "app:main"} and callable(app.main)
    assert PYPROJECT["tool"]["setuptools"]["py-modules"] == ["app"]
    assert PYPROJECT["build-system"]["build-backend"] == "setuptools.build_meta"


def test_the_wheel_carries_the_assets_the_app_reads() -> None:
    """Everything under assets/ but the README's screenshots is package data of ``assets``, which installs
    next to engine/ and explorer/, where the code looks for it."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["include"] == ["engine*", "explorer*", "assets"]
    patterns = setuptools["package-data"]["assets"]
    files = [p.relative_to(ROOT / "assets").as_posix() for p in (ROOT / "assets").rglob("*") if p.is_file()]
    shipped = {f for f in files if any(fnmatch.fnmatchcase(f, pattern) for pattern in patterns)}
    assert {f for f in files if not f.startswith("screenshots/")} <= shipped
    assert not any(f.startswith("screenshots/") for f in shipped)
    assert {"default-model/model.safetensors", "tokenizer/vocab.txt", "style.css"} <= shipped


def test_every_name_the_engine_package_exports_imports():
    """``engine.Trainer`` and the other lazy exports resolve (a moved module would break them silently)."""
    import engine

    assert all(getattr(engine, name) is not None for name in engine.__all__)
