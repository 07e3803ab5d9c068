"""The model size cap comes from ``EXPLORER_MAX_MODEL_PARAMS``; the registry passes it to every load and its
refusal names the setting."""
from __future__ import annotations

from pathlib import Path

import pytest

import engine
from engine.checkpoints.model_fit import DEFAULT_MAX_PARAMETERS, ModelTooLargeError
from explorer.models.registry import ModelRegistry
from explorer.models.settings import heavy_concurrency, max_model_parameters
from support.checkpoint_helpers import ours_model


@pytest.mark.parametrize(("raw", "count"), [
    ("", DEFAULT_MAX_PARAMETERS), ("5e8", 500_000_000), ("340000000", 340_000_000), ("1_000_000", 1_000_000),
    ("2,000", 2_000), ("nonsense", DEFAULT_MAX_PARAMETERS), ("nan", DEFAULT_MAX_PARAMETERS),
    ("inf", DEFAULT_MAX_PARAMETERS), ("-5", 0),
])
def test_the_model_size_cap_comes_from_the_environment(raw: str, count: int) -> None:
    assert max_model_parameters({"EXPLORER_MAX_MODEL_PARAMS": raw}) == count
    assert max_model_parameters({}) == 2_000_000_000


@pytest.mark.parametrize(("raw", "count"), [("", 1), ("4", 4), ("0", 1), ("-2", 1), ("two", 1), ("2.5", 1)])
def test_the_heavy_concurrency_comes_from_the_environment(raw: str, count: int) -> None:
    assert heavy_concurrency({"EXPLORER_HEAVY_CONCURRENCY": raw}) == count and heavy_concurrency({}) == 1


def test_the_registry_refuses_a_model_over_its_cap_and_names_the_setting(monkeypatch, make_config,
                                                                         tmp_path: Path) -> None:
    folder = engine.save(ours_model(make_config(), ("mlm",), False), None, tmp_path / "model")
    monkeypatch.setenv("EXPLORER_MAX_MODEL_PARAMS", "1000")
    registry = ModelRegistry(runs_root=tmp_path / "runs", default_dir=folder)
    assert registry.max_parameters == 1000
    with pytest.raises(ModelTooLargeError, match=r"[\d,]+ parameters, over the limit of 1,000 "
                                                 r"\(the limit is EXPLORER_MAX_MODEL_PARAMS\)"):
        registry.get("default")
    roomy = ModelRegistry(runs_root=tmp_path / "runs", default_dir=folder, max_parameters=10_000_000)
    assert roomy.get("default").heads == ("mlm",)
