"""Issue 38: the app starts and serves /train_status with a named pipe, a /dev/zero link and a symlink loop in its
runs folder, and still answers a probing request on the bundled model; the damaged run is listed as damaged, not
read. A read that blocks is a hang, not a slow answer: each call fails after `hostile_helpers.CALL_TIMEOUT_S`
(no wall-clock assert, which a loaded machine would break)."""
from __future__ import annotations

import os

from support.hostile_helpers import call, expect_ok, served_default_app


def poison(runs) -> None:
    run = runs / "poisoned"
    checkpoint = run / "checkpoints" / "step-000001"
    checkpoint.mkdir(parents=True)
    os.mkfifo(run / "run.json")
    (run / "metrics.jsonl").symlink_to("/dev/zero")
    (checkpoint / "training_state.pt").write_bytes(b"not a state")
    os.mkfifo(checkpoint / "explorer_state.json")
    (checkpoint / "config.json").symlink_to("/dev/zero")
    loop = runs / "loops"
    loop.mkdir()
    (loop / "l1").symlink_to(".")
    (loop / "l2").symlink_to(".")


def test_the_app_serves_with_pipes_devices_and_loops_in_its_runs_folder(tmp_path):
    (tmp_path / "runs").mkdir()
    poison(tmp_path / "runs")
    with served_default_app(tmp_path) as (client, box):
        status = expect_ok(call(client, api_name="/train_status"))[0]
        for _ in range(3):
            expect_ok(call(client, api_name="/train_status"))
        assert isinstance(status, str) and status.strip()
        tokens = expect_ok(call(client, "default", "The river bank.", "", 64, api_name="/tokenize"))
        assert tokens
