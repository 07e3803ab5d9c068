"""Damaged runs never take the app down: the picker, the run list, /train_status and the unknown-key message
list what is whole and name what is damaged; any folder name works as a key (issue 27)."""
from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import explorer.page
from engine.training.worker.errors import CannotContinueError
from engine.training.worker.training_worker import TrainingWorker
from explorer.models.registry import ModelRegistry, UnknownModelError
from explorer.services import Services
from explorer.training.live import live_view
from explorer.training.runs import run_choices
from explorer.runs.status import status_markdown
from support.damage_helpers import unreadable, runs  # noqa: F401 (the fixture)
from support.probing_helpers import write_run

GOOD_KEYS = ["checkpoint:good/step-000004", "checkpoint:good/step-000002"]
BAD_STEP = "checkpoints/step-000003"


def services_over(root: Path, tokenizer) -> Services:
    """The app's services over the runs folder ``root``: a worker and a registry reading it (no default)."""
    worker = TrainingWorker(root)
    return Services(tokenizer=tokenizer, worker=worker, models=ModelRegistry(runs_root=root, worker=worker,
                                                                             default_dir=None))


def everything_listed(services: Services) -> dict:
    """Every view of the runs folder the app serves, as start-up, the picker's timer and /train_status call
    them; raises only if one of them does."""
    registry, worker = services.registry(), services.get_worker()
    keys = registry.available_keys()
    with pytest.raises(UnknownModelError, match="Models available now: checkpoint:"):
        services.model("checkpoint:nothing/step-000001")
    return {"keys": keys, "runs": [r.name for r in registry.runs()], "labels": [c.label for c in registry.choices()],
            "over": [c.key for c in registry.run_checkpoints(run="good")], "choices": run_choices(services),
            "status": status_markdown(worker.status()), "live": live_view(services),
            "summaries": worker.runs()}


@pytest.mark.parametrize("name", ["my run", "ünï côde", "x..y", " lead", "back\\slash", "-dash", "a" * 200])
def test_any_folder_name_the_runs_folder_holds_works_as_a_key(tmp_path: Path, tiny_tokenizer, name: str) -> None:
    root = tmp_path / "runs"
    write_run(root, tiny_tokenizer, steps=(2,), run=name)
    registry = ModelRegistry(runs_root=root, default_dir=None)
    key = f"checkpoint:{name}/step-000002"
    assert registry.available_keys() == [key]
    assert registry.get(key).model.config.hidden_size == 32
    assert [c.key for c in registry.run_checkpoints(key)] == [key]
    assert registry.runs()[0].name == name


def test_a_name_no_key_can_hold_is_left_out_of_the_picker_with_a_warning(runs: Path, tiny_tokenizer,
                                                                          caplog) -> None:
    write_run(runs, tiny_tokenizer, steps=(5,), run="line\nbreak")
    services = services_over(runs, tiny_tokenizer)
    with caplog.at_level(logging.WARNING):
        keys = services.registry().available_keys()
    assert sorted(keys) == sorted(GOOD_KEYS + ["checkpoint:bad/step-000003", "checkpoint:bad/step-000001"])
    assert "The run 'line\\nbreak' is left out of the model list: its folder's name holds control characters; " \
           "rename the folder to list it" in caplog.text
    caplog.clear()
    services.registry().available_keys()
    assert "left out" not in caplog.text                                          # said once
    assert "line\nbreak" in [name for _, name in run_choices(services)]     # it can still be continued by name
    with pytest.raises(UnknownModelError, match="is not a checkpoint name"):
        services.registry().get("checkpoint:../good/step-000002")


def test_a_damaged_checkpoint_record_is_labelled_in_the_picker(runs: Path, tiny_tokenizer) -> None:
    (runs / "bad" / BAD_STEP / "explorer_state.json").write_text(json.dumps({"metrics": [1, 2]}))
    services = services_over(runs, tiny_tokenizer)
    listed = everything_listed(services)
    label = "bad · step 3 · ⚠ explorer_state.json: metrics is a list, not an object (the weights may still load)"
    assert label in listed["labels"] and set(GOOD_KEYS) <= set(listed["keys"])
    assert services.model("checkpoint:bad/step-000003").model.config.hidden_size == 32    # it still loads
    bad = next(text for text, name in listed["choices"] if name == "bad")
    assert bad.endswith("⚠ damaged: step-000003: explorer_state.json: metrics is a list, not an object; Continue "
                        "passes over a damaged checkpoint to the newest good one")


def test_an_unreadable_checkpoint_folder_breaks_neither_listing_nor_messages(runs: Path, tiny_tokenizer,
                                                                              monkeypatch) -> None:
    with unreadable(monkeypatch, runs / "bad" / BAD_STEP):
        services = services_over(runs, tiny_tokenizer)
        listed = everything_listed(services)
        assert set(listed["keys"]) == set(GOOD_KEYS + ["checkpoint:bad/step-000001"])
        with pytest.raises(UnknownModelError, match="Checkpoint bad/step-000003 does not exist"):
            services.model("checkpoint:bad/step-000003")
    with unreadable(monkeypatch, runs / "bad"):
        services = services_over(runs, tiny_tokenizer)        # a fresh worker: its listing is cached for 1 s
        listed = everything_listed(services)
        assert set(listed["keys"]) == set(GOOD_KEYS)
        assert ("bad · step 0 · 0 checkpoints · ⚠ damaged: the server cannot read its folder (Permission denied); "
                "fix the folder's permissions or remove it", "bad") in listed["choices"]
        with pytest.raises(CannotContinueError, match="the run bad cannot be used"):
            services.get_worker().continue_run("bad")


def test_the_whole_app_builds_over_a_runs_folder_with_every_kind_of_damage(runs: Path, tiny_tokenizer,
                                                                            monkeypatch) -> None:
    bad_step = runs / "bad" / BAD_STEP
    (bad_step / "explorer_state.json").write_text('{"created": "yesterday", "epoch": 1e400}')
    (runs / "bad" / "run.json").write_bytes(b"\xff garbage")
    (runs / "bad" / "metrics.jsonl").write_bytes(b'{"step": "abc"}\n\xff\n')
    (runs / "stray.txt").write_text("not a run")
    (runs / "dangling").symlink_to(runs / "nowhere")
    (runs / "locked" / "checkpoints").mkdir(parents=True)
    with unreadable(monkeypatch, runs / "locked"):
        demo = explorer.page.build_app(services_over(runs, tiny_tokenizer))
    dropdowns = [block for block in demo.blocks.values() if type(block).__name__ == "Dropdown"]
    listed = {value for block in dropdowns for _, value in (block.choices or [])}
    assert set(GOOD_KEYS) <= listed and {"locked", "bad", "good"} <= listed


# ---------------------------------------------------------------------- random damage
TARGETS = ["run.json", "run_spec.json", "metrics.jsonl", "tokenizer", "checkpoints", BAD_STEP, "",
           f"{BAD_STEP}/explorer_state.json", f"{BAD_STEP}/trainer_state.json", f"{BAD_STEP}/config.json",
           f"{BAD_STEP}/model.safetensors", f"{BAD_STEP}/training_state.pt",
           "checkpoints/step-000001/explorer_state.json", "checkpoints/.step-000009.tmp-999999-x"]
FIELDS = st.sampled_from(["step", "epoch", "metrics", "eval_metrics", "created", "config", "total_steps", "kind",
                          "task", "corpus", "corpus_label", "corpus_file", "loss", "mlm_loss", "global_step"])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(FIELDS, inner, max_size=4),
                    max_leaves=10)
GOOD_RECORD = {"step": 3, "epoch": 0, "metrics": {"mlm_loss": 2.0}, "created": 1.0, "config": {"total_steps": 9},
               "kind": "train", "task": "pretraining", "corpus": "shakespeare"}
DAMAGE = st.one_of(
    st.tuples(st.just("bytes"), st.binary(max_size=48)),
    st.tuples(st.just("fields"), st.dictionaries(FIELDS, JSON, min_size=1, max_size=4)),
    st.tuples(st.just("json"), JSON),
    st.tuples(st.just("truncated"), st.integers(0, 60)),
    st.sampled_from([("empty",), ("missing",), ("dangling",), ("folder",), ("unreadable",)]),
)
NAMES = st.sampled_from(["bad", "my run", "ünï", "line\nbreak", "x..y", ".hidden", "-dash", "tab\there"])


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A runs folder with ``good`` (steps 2, 4) and ``bad`` (steps 1, 3, with run.json and metrics.jsonl)."""
    from engine.text.tokenizer import WordPieceTokenizer
    from tests.conftest import VOCAB

    tokenizer = WordPieceTokenizer.from_vocab({tok: i for i, tok in enumerate(VOCAB)})
    root = tmp_path_factory.mktemp("template") / "runs"
    write_run(root, tokenizer, steps=(2, 4), run="good")
    write_run(root, tokenizer, steps=(1, 3), run="bad")
    (root / "bad" / "run.json").write_text(json.dumps({"task": "pretraining", "corpus": "shakespeare"}))
    (root / "bad" / "metrics.jsonl").write_text("".join(json.dumps({"kind": "train", "step": s, "loss": 1.0}) + "\n"
                                                        for s in (1, 2, 3)))
    (root / "bad" / "tokenizer").mkdir()
    return root


def damage(path: Path, kind: tuple, locked: list[Path]) -> None:
    """Write ``kind`` of damage at ``path`` (a file or folder of the bad run)."""
    if not path.parent.is_dir() or path.parent.is_symlink():   # an earlier damage replaced a folder above it
        return
    if kind[0] == "unreadable":
        locked.append(path)
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    if kind[0] == "bytes":
        path.write_bytes(kind[1])
    elif kind[0] == "fields":
        path.write_text(json.dumps({**GOOD_RECORD, **kind[1]}))
    elif kind[0] == "json":
        path.write_text(json.dumps(kind[1]))
    elif kind[0] == "truncated":
        path.write_text(json.dumps(GOOD_RECORD)[:kind[1]])
    elif kind[0] == "empty":
        path.write_bytes(b"")
    elif kind[0] == "dangling":
        path.symlink_to(path.parent / "nowhere-at-all")
    elif kind[0] == "folder":
        path.mkdir()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=NAMES, damages=st.lists(st.tuples(st.sampled_from(TARGETS), DAMAGE), min_size=1, max_size=4))
def test_random_damage_never_takes_the_app_down(template: Path, tiny_tokenizer, name: str, damages: list) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp) / "runs"
        shutil.copytree(template, root, symlinks=True)
        bad = (root / "bad").rename(root / name)
        locked: list[Path] = []
        for target, kind in damages:
            damage(bad / target if target else bad, kind, locked)
        services = services_over(root, tiny_tokenizer)
        patch = pytest.MonkeyPatch()
        try:
            with unreadable(patch, *locked):
                listed = everything_listed(services)
                with pytest.raises(CannotContinueError):       # its training states are not real ones
                    services.get_worker().continue_run(name)
        finally:
            patch.undo()
        assert set(GOOD_KEYS) <= set(listed["keys"]) and "good" in listed["runs"]
        assert listed["over"] == GOOD_KEYS[::-1]
        assert "good" in [run for _, run in listed["choices"]]
        assert all(run.name != "good" or not run.problems for run in listed["summaries"])
