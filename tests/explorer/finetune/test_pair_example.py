"""The Fine-tune tab's second bundled example for sequence classification: the QNLI-style sentence pairs made from
SQuAD are offered beside sentiment.csv with their CC BY-SA licence, and choosing them makes a job on the pair file
whose check counts its examples and both labels."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from engine.data.classification import read_classification_file
from explorer.finetune import tab as finetune_tab
from explorer.finetune.job import make_job
from explorer.services import Services
from support.finetune_tab_helpers import form, tiny_app_services

ROOT = Path(__file__).resolve().parents[3]
PAIRS = ROOT / "assets" / "examples" / "qnli-squad-sample.csv"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def services(tmp_path_factory) -> Iterator[Services]:
    """The app's services over a tiny BERT (the ``default`` folder) that knows the pairs' words."""
    texts = [t for e in read_classification_file(PAIRS) for t in (e.text, e.text_pair or "")]
    with tiny_app_services(tmp_path_factory.mktemp("finetune-pairs"), texts) as services:
        yield services


def test_classification_offers_the_pairs_with_their_licence(services: Services) -> None:
    from support.probing_helpers import small_app

    fns = {f.api_name: f.fn for f in small_app(services, finetune_tab.build).fns.values()}
    example, _, formats, *_ = fns["finetune_task_changed"]("classification")
    assert example.choices == [("sentiment.csv", ""), ("qnli-squad-sample.csv", "qnli-squad-sample.csv")]
    assert "CC BY-SA 4.0" in formats and "SQuAD" in formats and "entailment" in formats


def test_choosing_the_pairs_makes_a_job_on_them(services: Services) -> None:
    job = make_job(services, *form("classification", example="qnli-squad-sample.csv"))
    assert Path(job.spec.data) == PAIRS and job.spec.task == "classification"
    assert job.data.examples == 1000 and "labels: entailment, not_entailment" in job.data.summary
