"""The app's command line (``python app.py`` and the ``bert-explorer`` script): --help and --version print and
exit before gradio and torch are imported, another argument exits 2, and the start-up block says what is in use."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def _run(args: list[str], code: str | None = None) -> subprocess.CompletedProcess:
    """``python app.py <args>`` (or ``python -c code``) from the repository root, output captured."""
    command = [sys.executable, "-c", code] if code is not None else [sys.executable, "app.py", *args]
    return subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=120)


def _readme_settings() -> set[str]:
    """Every variable README's "Configuration" table names."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])}


def test_help_prints_the_settings_and_exits_without_serving():
    result = _run(["--help"])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("usage: app.py [-h] [--version] [--port PORT] [--host HOST]") and "--version" in out
    assert 'README "Configuration"' in out
    missing = {name for name in _readme_settings() - {"SPACE_ID"} if name not in out}
    assert not missing, f"--help does not name {sorted(missing)}"
    assert "Running on" not in out + result.stderr


@pytest.mark.parametrize("argv0", ["app.py", "/venv/bin/bert-explorer"])
def test_version_and_help_answer_before_gradio_and_torch_are_imported(argv0):
    """As ``python app.py`` (run as __main__) and as the console script (``from app import main``)."""
    load = ("runpy.run_path('app.py', run_name='__main__')" if argv0 == "app.py" else "import app")
    code = (f"import runpy, sys\nsys.argv = [{argv0!r}, '--version']\ntry:\n    {load}\n"
            "except SystemExit as exc:\n"
            "    print('exit', exc.code, 'gradio' in sys.modules, 'torch' in sys.modules, file=sys.stderr)\n")
    result = _run([], code)
    assert result.stdout == f"{Path(argv0).name} {VERSION}\n", result.stderr
    assert result.stderr.strip().endswith("exit 0 False False"), result.stderr


def test_unknown_arguments_exit_2_with_the_reason():
    result = _run(["--serve", "now"])
    assert result.returncode == 2 and result.stdout == ""
    assert "usage: app.py [-h] [--version]" in result.stderr
    assert "error: unrecognized arguments: --serve now" in result.stderr


@pytest.mark.parametrize("port", ["0", "70000", "http"])
def test_a_bad_port_exits_2_before_anything_loads(port):
    result = _run(["--port", port])
    assert result.returncode == 2 and "argument --port" in result.stderr and "Traceback" not in result.stderr


def test_port_and_host_reach_launch(monkeypatch):
    import app

    launched = {}

    class Demo:
        local_url = "http://0.0.0.0:9000/"

        def launch(self, **options):
            launched.update(options)

        def block_thread(self):
            pass

    monkeypatch.setattr(app, "create_app", lambda services: Demo())
    monkeypatch.setattr(app, "default_services", lambda runs_root: None)
    monkeypatch.setattr(app, "startup_summary", lambda services, url: url)
    monkeypatch.setattr(app, "after_start", lambda services: None)
    app.main(["--port", "9000", "--host", "0.0.0.0"])
    assert (launched["server_port"], launched["server_name"]) == (9000, "0.0.0.0")
    launched.clear()
    app.main([])                                    # without them, Gradio reads GRADIO_SERVER_PORT / _NAME itself
    assert "server_port" not in launched and "server_name" not in launched or os.environ.get("SPACE_ID")


def test_main_parses_its_arguments_before_building_anything(capsys):
    import app

    with pytest.raises(SystemExit) as exit_info:
        app.main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.endswith(f" {VERSION}\n")
    with pytest.raises(SystemExit) as exit_info:
        app.main(["serve", "--now"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: serve --now" in capsys.readouterr().err
    assert app.package_version() == VERSION


def test_startup_summary_names_the_model_runs_folder_cache_and_mode(tmp_path, monkeypatch):
    import dataclasses

    import app
    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR
    from explorer.serving.access import AccessPolicy
    from explorer.services import default_services

    monkeypatch.delenv("EXPLORER_DEFAULT_MODEL", raising=False)
    monkeypatch.delenv("EXPLORER_PUBLIC", raising=False)
    monkeypatch.setenv("BERT_ENGINE_CACHE", str(tmp_path / "cache"))
    services = default_services(runs_root=tmp_path / "runs")
    lines = app.startup_summary(services, "http://127.0.0.1:7860/").splitlines()
    assert lines[0] == f"BERT Explorer {VERSION} at http://127.0.0.1:7860/"
    fields = {line[:17].strip(): line[17:] for line in lines[1:]}
    assert list(fields) == ["default model", "runs folder", "token cache", "mode", "settings"]
    assert fields["default model"] == f"{DEFAULT_MODEL_DIR} (bundled)"
    assert fields["runs folder"] == str((tmp_path / "runs").resolve())
    assert fields["token cache"] == str((tmp_path / "cache").resolve())
    assert fields["mode"].startswith("private:") and "EXPLORER_PUBLIC=1" in fields["mode"]
    assert "--help" in fields["settings"] and 'README "Configuration"' in fields["settings"]
    public = dataclasses.replace(services, access=AccessPolicy(public=True))
    assert "  mode           public: training is off (EXPLORER_ADMIN_TOKEN is not set)" in \
        app.startup_summary(public, "u")
    admin = dataclasses.replace(services, access=AccessPolicy(public=True, admin_token="s3cret-token"))
    with_token = app.startup_summary(admin, "u")
    assert "public: training and local models need the admin token" in with_token
    assert "s3cret-token" not in with_token
