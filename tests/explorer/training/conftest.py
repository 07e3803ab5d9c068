"""What the Training tab's test modules share: the app's services over a runs folder of their own."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from explorer.services import Services, default_services


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """Default services (the bundled tokenizer, a training worker) over an empty runs folder; the worker is closed
    after the module's last test. A module may define its own ``services`` instead."""
    svc = default_services(runs_root=tmp_path_factory.mktemp("runs"))
    yield svc
    svc.get_worker().close(timeout_s=30)
