"""Cold start: building the app reads model configs, never weights; bench/cold_start.py's timing loop."""
from __future__ import annotations

import importlib.util
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

from explorer.models import registry as model_registry
from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR
from engine.model.config import BertConfig
from explorer.models.registry import ModelRegistry
from engine.text.tokenizer import WordPieceTokenizer
from explorer.attention import tab as attention_tab
from explorer.embeddings import tab as embeddings_tab
from explorer.services import default_services
from support.probing_helpers import make_services

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "cold_start.py"


def load_bench() -> ModuleType:
    if "bench_cold_start" in sys.modules:
        return sys.modules["bench_cold_start"]
    spec = importlib.util.spec_from_file_location("bench_cold_start", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def no_weight_loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every weight load the registry attempts is recorded and refused."""
    loads: list[Path] = []

    def refuse(directory, *args, **kwargs):
        loads.append(Path(directory))
        raise AssertionError(f"weights loaded from {directory} while building the UI")

    monkeypatch.setattr(model_registry, "load_directory", refuse)
    return loads


def test_building_the_app_loads_no_weights(no_weight_loads: list[Path], tmp_path: Path) -> None:
    import app

    services = default_services(runs_root=tmp_path)
    try:
        app.create_app(services)
        assert no_weight_loads == []
        # The sliders still start at the bundled model's shape, read from its config.json.
        config = BertConfig.load(DEFAULT_MODEL_DIR)
        assert embeddings_tab._initial_layers(services, "default") == config.num_hidden_layers
        assert attention_tab._initial_shape(services, "default") == (config.num_hidden_layers,
                                                                     config.num_attention_heads)
        assert no_weight_loads == []
    finally:
        services.get_worker().close(timeout_s=30)


def test_peek_config_never_loads(no_weight_loads: list[Path], tiny_tokenizer: WordPieceTokenizer,
                                 tmp_path: Path) -> None:
    registry = make_services(tiny_tokenizer).registry()
    assert registry.peek_config("default").hidden_size == 32          # pinned: its config
    assert registry.peek_config("checkpoint:run/step-000001") is None  # only a load would tell
    assert registry.peek_config("no such model") is None and registry.peek_config(None) is None
    bundled = ModelRegistry(runs_root=tmp_path, default_dir=DEFAULT_MODEL_DIR)
    assert bundled.peek_config("default") == BertConfig.load(DEFAULT_MODEL_DIR)
    assert ModelRegistry(runs_root=tmp_path, default_dir=tmp_path / "missing").peek_config("default") is None
    assert no_weight_loads == []
    # Unknown layouts fall back to the tabs' defaults.
    assert attention_tab._initial_shape(make_services(tiny_tokenizer), "checkpoint:run/step-000001") \
        == attention_tab.DEFAULT_SHAPE


def _fake_app(tmp_path: Path, delay_s: float, exit_code: int | None = None) -> Path:
    """A stand-in for app.py: after ``delay_s`` serves HTTP 200 on $GRADIO_SERVER_PORT (or exits)."""
    script = tmp_path / "fake_app.py"
    script.write_text(textwrap.dedent(f"""
        import http.server, os, sys, time
        time.sleep({delay_s})
        if {exit_code!r} is not None:
            sys.exit({exit_code!r})
        server = http.server.HTTPServer(("127.0.0.1", int(os.environ["GRADIO_SERVER_PORT"])),
                                        http.server.SimpleHTTPRequestHandler)
        server.serve_forever()
    """), encoding="utf-8")
    return script


def test_time_to_serving_counts_until_http_200(tmp_path: Path) -> None:
    bench = load_bench()
    started = time.perf_counter()
    seconds = bench.time_to_serving([sys.executable, str(_fake_app(tmp_path, 0.5))], 60.0, tmp_path / "log")
    assert 0.5 <= seconds <= time.perf_counter() - started


def test_an_app_that_exits_is_reported(tmp_path: Path) -> None:
    bench = load_bench()
    with pytest.raises(RuntimeError, match="exited with 3"):
        bench.time_to_serving([sys.executable, str(_fake_app(tmp_path, 0.0, exit_code=3))], 60.0, tmp_path / "log")


def test_after_start_loads_the_default_model_then_warms_the_optimizer(monkeypatch: pytest.MonkeyPatch,
                                                                       tiny_tokenizer: WordPieceTokenizer) -> None:
    import app

    order: list[str] = []
    services = make_services(tiny_tokenizer)
    real_model = services.model
    monkeypatch.setattr(services, "model", lambda key: order.append(f"model {key}") or real_model(key))
    monkeypatch.setattr("engine.training.loop.optim.warm_up", lambda: order.append("warm_up"))
    app.after_start(services)
    assert order == ["model default", "warm_up"]
    # A default model that will not load is left for the model picker to report.
    monkeypatch.setattr(services, "model", lambda key: (_ for _ in ()).throw(FileNotFoundError("gone")))
    order.clear()
    app.after_start(services)
    assert order == ["warm_up"]
