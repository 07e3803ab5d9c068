"""The Fine-tune tab's word tagging and multiple-choice rows: choosing them offers their examples (the tagged
example's CC BY-SA licence said where it is chosen), a file is checked by the engine's readers before a run,
the listed tags are enforced, the built-in next-sentence example needs no file, and a real tiny run of each
through the served ``/finetune_start`` finishes with its curves and its table of held-out mistakes."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import gradio as gr
import pytest
from gradio_client import Client

from support.app_helpers import serve
from engine.data.tagged_text import read_tagged_file
from engine.text.builtin_corpus import builtin_corpus
from explorer.finetune import tab as finetune_tab
from explorer.finetune.job import make_job
from explorer.finetune.mistakes import named
from explorer.finetune.tasks import NEXT_SENTENCE, NEXT_SENTENCE_SCENES, finetune_rows
from explorer.services import Services
from explorer.ui_errors import friendly_errors
from support.finetune_tab_helpers import form as tab_form, tiny_app_services

ROOT = Path(__file__).resolve().parents[3]
POS = ROOT / "assets" / "examples" / "pos-ewt-sample.tsv"
CHOICES = ROOT / "assets" / "examples" / "choices.csv"
TIMEOUT = 120.0

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def services(tmp_path_factory) -> Iterator[Services]:
    """The app's services over a tiny BERT (the ``default`` folder) that knows the examples' words."""
    root = tmp_path_factory.mktemp("finetune-new-tasks")
    texts = [" ".join(s.words) for s in read_tagged_file(POS)] + CHOICES.read_text(encoding="utf-8").splitlines()
    texts += [s for doc in builtin_corpus("shakespeare", NEXT_SENTENCE_SCENES) for s in doc]
    with tiny_app_services(root, texts) as services:
        yield services


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[Client]:
    import app

    with serve(app.create_app(services)) as running:
        yield running


def form(**changes: Any) -> list[Any]:
    return tab_form(changes.pop("task", "token_classification"), **changes)


def finished(client: Client, services: Services) -> tuple[Any, ...]:
    assert services.get_worker().join(TIMEOUT), services.get_worker().status().message
    outputs = client.predict(api_name="/finetune_status")
    assert outputs[0].startswith("**finished**"), outputs[0]
    return outputs


def test_choosing_a_task_offers_its_examples_with_their_licence(services: Services) -> None:
    from support.probing_helpers import small_app

    fns = {f.api_name: f.fn for f in small_app(services, finetune_tab.build).fns.values()}
    example, upload, formats, labels, *numbers = fns["finetune_task_changed"]("token_classification")
    assert example.choices[0] == ("pos-ewt-sample.tsv", "") and upload.file_types == [".conllu", ".tsv", ".txt"]
    assert "CC BY-SA 4.0" in formats and "Universal Dependencies English EWT" in formats and "CoNLL-U" in formats
    assert labels.visible is True and "NOUN" in labels.placeholder
    assert numbers[0].placeholder == f"{finetune_rows()['token_classification'].defaults['steps']:g}"
    example, upload, formats, labels, *_ = fns["finetune_task_changed"]("multiple_choice")
    assert example.choices == [("choices.csv", ""), (NEXT_SENTENCE, NEXT_SENTENCE)]
    assert upload.file_types == [".csv"] and "choice0" in formats and labels.visible is False


def test_a_tagged_file_is_read_before_the_run_and_its_tags_summarised(services: Services) -> None:
    job = make_job(services, *form())
    assert job.spec.task == "token_classification" and Path(job.spec.data) == POS
    assert job.data.examples == 312 and "312 sentences, 5,820 words · 17 tags: NOUN 867, PUNCT 714" in job.data.summary


def test_listed_tags_are_enforced_and_entity_tags_named(services: Services, tmp_path: Path) -> None:
    upload = tmp_path / "ner.conllu"
    lines = ["# sent_id = 1", "1\tAnn\tAnn\tB-PER\t_\t_\t0\troot\t_\t_", "2\tran\trun\tO\t_\t_\t1\tdep\t_\t_", "",
             "1\tBob\tBob\tB-PER\t_\t_\t0\troot\t_\t_", "2\tsang\tsing\tO\t_\t_\t1\tdep\t_\t_", ""]
    upload.write_text("\n".join(lines), encoding="utf-8")
    job = make_job(services, *form(data_source="upload", data_file=str(upload), labels="B-PER, O"))
    assert "2 sentences, 4 words · 2 BIO entity tags (entity F1 is measured" in job.data.summary
    with pytest.raises(gr.Error, match=r"ner.conllu, line 2 \(the sentence that starts there\): the word 'Ann' has "
                                       r"the tag 'B-PER', which is not one of the tags you listed \(O, I-PER\)"):
        friendly_errors(make_job)(services, *form(data_source="upload", data_file=str(upload), labels="O, I-PER"))


def test_the_built_in_next_sentence_example_needs_no_file(services: Services) -> None:
    job = make_job(services, *form(task="multiple_choice", example=NEXT_SENTENCE))
    spec = job.spec
    assert (spec.data, spec.corpus, spec.settings.num_choices, spec.max_documents) == (None, "shakespeare", 4,
                                                                                        NEXT_SENTENCE_SCENES)
    pairs = sum(len(doc) - 1 for doc in builtin_corpus("shakespeare", NEXT_SENTENCE_SCENES))
    assert job.data.examples == pairs and f"{pairs:,} next-sentence examples from 40 scenes" in job.data.summary
    csv = make_job(services, *form(task="multiple_choice")).spec
    assert Path(csv.data) == CHOICES and csv.max_documents is None


def test_tagging_end_to_end_through_the_api(client: Client, services: Services) -> None:
    started = client.predict(task="token_classification", steps=4, api_name="/finetune_start")
    assert "**pos-ewt-sample.tsv**" in started and "312 sentences" in started
    status, curves, note, wrong = finished(client, services)
    assert "task **token_classification**" in status and "held-out word accuracy" in status
    names = {s["name"] for s in curves["charts"][1]["series"] if s["id"] in curves["points"]}   # drawn: with points
    assert {"word accuracy (train)", "word accuracy (held-out)"} <= names and not any("entity" in n for n in names)
    found = services.get_worker().eval_examples()
    assert found is not None and found.task == "token_classification" and found.wrong   # 4 steps of a tiny model
    mistakes = [(p.index + 1, m) for p in found.wrong for m in p.mistakes]      # one row per wrongly tagged word
    assert len(wrong["data"]) == len(mistakes) == sum(p.words - p.words_right for p in found.predictions)
    assert "words** tagged wrong" in note and "One row per wrong word" in note
    for row, (number, m) in zip(wrong["data"], mistakes):
        assert row[0] == number and row[1].startswith(f"{m.word}: {named(m.expected)} → {named(m.predicted)} (")
        assert f"[{m.word}]" in row[2]


@pytest.mark.slow
def test_multiple_choice_from_shakespeare_end_to_end_through_the_api(client: Client, services: Services) -> None:
    assert services.get_worker().join(TIMEOUT)
    started = client.predict(task="multiple_choice", example=NEXT_SENTENCE, steps=2, api_name="/finetune_start")
    assert f"**{NEXT_SENTENCE}**" in started and "4 choices each" in started
    status, curves, note, wrong = finished(client, services)
    assert "task **multiple_choice**" in status
    assert "accuracy (held-out)" in {s["name"] for s in curves["charts"][1]["series"] if s["id"] in curves["points"]}
    run = services.get_worker().status().run_dir
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert (record["data"], record["corpus"], record["task_settings"]) == (None, "shakespeare", {"num_choices": 4})
    found = services.get_worker().eval_examples()
    assert found is not None and all(len(p.context.split(" · ")) == 4 for p in found.predictions)
    assert all(re.fullmatch(r"[0-3]: .+ → [0-3]: .+ \(\d[\d.]*%\)", row[1]) for row in wrong["data"])
