"""After a failed call the outputs it would have replaced are cleared, not left under the error as if
they answered the new input: every user-facing event has a failure follow-up that empties them
(``explorer.endpoints.clear_on_failure``); the real browser shows it in ``tests/e2e/test_walk.py``."""
from __future__ import annotations

import pytest

import explorer.page
from support.probing_helpers import make_services

# Public events that keep their outputs on failure, and why.
KEEPS_OUTPUTS = {
    "load_model": "its outputs are the picker and the description of the model still in use",
    "train_status": "a poll: the last status stays until the next one",
    "finetune_status": "a poll: the last status stays until the next one",
    **{name: "a run control: a refused one leaves the run's status as it is (the error is a toast), never blank"
       for name in ("train_start", "train_pause", "train_resume", "train_stop", "train_save", "train_continue",
                    "finetune_start")},
}


@pytest.fixture(scope="module")
def dependencies(tiny_tokenizer, tmp_path_factory) -> list[dict]:
    services = make_services(tiny_tokenizer, tmp_path_factory.mktemp("runs"))
    return explorer.page.build_app(services).get_config_file()["dependencies"]


def test_every_public_event_clears_its_outputs_when_it_fails(dependencies: list[dict]) -> None:
    followers: dict[int, list[dict]] = {}
    for d in dependencies:
        if d["trigger_only_on_failure"]:
            followers.setdefault(d["trigger_after"], []).append(d)

    def clears_own_outputs(event: dict) -> bool:
        return any(f["outputs"] and set(f["outputs"]) <= set(event["outputs"]) for f in followers.get(event["id"], []))

    missing = [d["api_name"] for d in dependencies
               if d["api_visibility"] == "public" and d["outputs"] and d["api_name"] not in KEEPS_OUTPUTS
               and not clears_own_outputs(d)]
    assert missing == []
