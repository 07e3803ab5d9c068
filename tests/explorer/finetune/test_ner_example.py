"""The Fine-tune tab's second bundled example for tagging words: the WNUT 17 named-entity posts are offered beside
the part-of-speech sample with their CC BY 4.0 licence, and choosing them makes a job on the file whose check counts
its posts and names its BIO entity tags (so entity F1 is measured)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from engine.data.tagged_text import read_tagged_file
from explorer.finetune import tab as finetune_tab
from explorer.finetune.job import make_job
from explorer.services import Services
from support.finetune_tab_helpers import form, tiny_app_services

ROOT = Path(__file__).resolve().parents[3]
NER = ROOT / "assets" / "examples" / "ner-wnut17-sample.tsv"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def services(tmp_path_factory) -> Iterator[Services]:
    """The app's services over a tiny BERT (the ``default`` folder) that knows the posts' words."""
    texts = [" ".join(s.words) for s in read_tagged_file(NER)[:200]]
    with tiny_app_services(tmp_path_factory.mktemp("finetune-ner"), texts) as services:
        yield services


def test_tagging_offers_the_entity_posts_with_their_licence(services: Services) -> None:
    from support.probing_helpers import small_app

    fns = {f.api_name: f.fn for f in small_app(services, finetune_tab.build).fns.values()}
    example, _, formats, *_ = fns["finetune_task_changed"]("token_classification")
    assert example.choices == [("pos-ewt-sample.tsv", ""), ("ner-wnut17-sample.tsv", "ner-wnut17-sample.tsv")]
    assert "CC BY 4.0" in formats and "WNUT 17" in formats and "300 steps" in formats


def test_choosing_the_entity_posts_makes_a_job_that_measures_entity_f1(services: Services) -> None:
    job = make_job(services, *form("token_classification", example="ner-wnut17-sample.tsv"))
    assert Path(job.spec.data) == NER and job.spec.task == "token_classification"
    assert job.data.examples == 2000
    assert "2,000 sentences, 38,792 words" in job.data.summary and "BIO entity tags (entity F1 is measured" in \
        job.data.summary
