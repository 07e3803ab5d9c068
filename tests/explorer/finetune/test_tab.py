"""The Fine-tune tab: the form becomes the command line's job, uploads are checked with clear messages, a real
tiny fine-tuning run started through the served API finishes with its curves, its table of held-out examples
it gets wrong and its checkpoint in the model picker, and the one worker's pretraining runs are shown honestly."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Iterator

import gradio as gr
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from support.app_helpers import serve
from engine.checkpoints.hf_format import load_directory
from engine.finetune import build_parser, spec_from_args
from engine.training.tasks.job_spec import JobSpec
from engine.training.worker.shared_state import WorkerStatus
from explorer.finetune import actions as finetune_actions
from explorer.finetune import tab as finetune_tab
from explorer.finetune.data import MAX_UPLOAD_BYTES
from explorer.finetune.job import make_job
from explorer.finetune.mistakes import WRONG_COLUMNS
from explorer.finetune.status import finetune_status
from explorer.finetune.tasks import finetune_rows
from explorer.models.choices import checkpoint_key
from explorer.services import Services
from explorer.ui_errors import friendly_errors
from support.finetune_tab_helpers import form as tab_form, tiny_app_services

ROOT = Path(__file__).resolve().parents[3]
SENTIMENT = ROOT / "assets" / "examples" / "sentiment.csv"
SQUAD = ROOT / "assets" / "examples" / "tiny_squad.json"
TIMEOUT = 120.0

pytestmark = pytest.mark.usefixtures("one_thread")


def _texts() -> list[str]:
    rows = SENTIMENT.read_text(encoding="utf-8").splitlines()[1:]
    squad = json.loads(SQUAD.read_text(encoding="utf-8"))
    paragraphs = [p for article in squad["data"] for p in article["paragraphs"]]
    return rows + [p["context"] for p in paragraphs] + [q["question"] for p in paragraphs for q in p["qas"]]


@pytest.fixture(scope="module")
def services(tmp_path_factory) -> Iterator[Services]:
    """The app's services over a tiny BERT (saved as the ``default`` folder) that knows the examples' words."""
    root = tmp_path_factory.mktemp("finetune-tab")
    with tiny_app_services(root, _texts()) as services:
        yield services


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[Client]:
    import app

    with serve(app.create_app(services)) as running:
        yield running


def form(**changes: Any) -> list[Any]:
    return tab_form(changes.pop("task", "classification"), **changes)


def wait_until_ended(services: Services) -> None:
    assert services.get_worker().join(TIMEOUT), services.get_worker().status().message


def test_the_form_makes_the_job_the_command_line_makes(services: Services) -> None:
    job = make_job(services, *form(steps=40, batch_size=16, learning_rate=1e-4, seq_length=64, eval_fraction=0.2))
    folder = services.registry().folder("default")
    parser = build_parser()
    cli = spec_from_args(parser.parse_args(["--task", "classification", "--data", str(SENTIMENT), "--init-from",
                                            str(folder), "--steps", "40", "--batch-size", "16", "--lr", "1e-4",
                                            "--seq-len", "64", "--eval-fraction", "0.2"]), parser)
    ours, theirs = job.spec.training_config(), cli.training_config()
    for name in ("task", "learning_rate", "total_steps", "batch_size", "max_seq_length", "nsp", "seed",
                 "checkpoint_every_s"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.checkpoint_every == 0 and ours.checkpoint_every_s == 300.0    # saved by time before its last step
    for name in ("init_from", "data", "eval_fraction", "eval_data"):
        assert getattr(job.spec, name) == getattr(cli, name), name
    assert job.data_name == "sentiment.csv" and "labels: negative, positive" in job.data.summary



def test_a_registered_tasks_settings_are_form_fields_with_no_tab_edit(services: Services) -> None:
    """The toy task (``support.toy_task``: a module and one ``registered`` line) is offered by the tab with a box for
    its setting (label, help, its default in grey), a parameter of ``/finetune_start``, and its value in the job."""
    from engine.training.tasks.registry import registered
    from support.probing_helpers import small_app
    from support.toy_task import SMOOTHED, SmoothingSettings

    assert SMOOTHED.name not in finetune_rows()
    with registered(SMOOTHED):
        assert list(finetune_rows())[-1] == SMOOTHED.name and finetune_rows()[SMOOTHED.name].examples == ()
        app = small_app(services, finetune_tab.build)
        fns = {f.api_name: f.fn for f in app.fns.values()}
        params = [p["parameter_name"] for p in app.get_api_info()["named_endpoints"]["/finetune_start"]["parameters"]]
        assert params[-3:] == ["max_question_len", "num_choices", "label_smoothing"]
        *_, smoothing = fns["finetune_task_changed"](SMOOTHED.name)
        assert smoothing.visible is True and smoothing.placeholder == "0.0"
        *_, stride, question, choices, smoothing = fns["finetune_task_changed"]("qa")
        assert (stride.visible, question.visible, choices.visible, smoothing.visible) == (True, True, False, False)
        upload = write_csv_upload(services)
        job = make_job(services, *form(task=SMOOTHED.name, data_source="upload", data_file=str(upload),
                                       settings={"label_smoothing": "0.2", "doc_stride": "9"}))
        assert job.spec.settings == SmoothingSettings(0.2) and job.spec.task_settings == {"label_smoothing": 0.2}
        with pytest.raises(gr.Error, match=r"Label smoothing must be in \[0, 1\), got 1.5"):
            friendly_errors(make_job)(services, *form(task=SMOOTHED.name, data_source="upload",
                                                      data_file=str(upload), settings={"label_smoothing": "1.5"}))
        with pytest.raises(gr.Error, match="Label smoothing must be a number, got 'lots'"):
            friendly_errors(make_job)(services, *form(task=SMOOTHED.name, data_source="upload",
                                                      data_file=str(upload), settings={"label_smoothing": "lots"}))
        with pytest.raises(gr.Error, match="has no bundled example; choose \"Upload a file\""):
            friendly_errors(make_job)(services, *form(task=SMOOTHED.name))


def write_csv_upload(services: Services) -> Path:
    """The bundled sentiment CSV as an upload would arrive (a file outside the app's folders)."""
    path = services.get_worker().runs_root / "toy-upload" / "sentiment.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SENTIMENT.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def test_qa_windows_and_choices_are_settings_boxes(services: Services) -> None:
    qa = make_job(services, *form(task="qa", seq_length=128)).spec
    assert qa.task_settings == {"doc_stride": 32, "max_question_len": 32}          # a quarter of 128 each
    qa = make_job(services, *form(task="qa", seq_length=128, settings={"doc_stride": "40"})).spec
    assert qa.settings.doc_stride == 40 and qa.settings.max_question_len == 32
    with pytest.raises(gr.Error, match=r"Doc stride \(100\) must be smaller than the context room of a window: "
                                       r"Sequence length 128 - Max question len 32 = 96"):
        friendly_errors(make_job)(services, *form(task="qa", seq_length=128, settings={"doc_stride": "100",
                                                                                          "max_question_len": ""}))
    with pytest.raises(gr.Error, match="Doc stride must be a whole number, got '4.5'"):
        friendly_errors(make_job)(services, *form(task="qa", settings={"doc_stride": "4.5"}))
    choice = make_job(services, *form(task="multiple_choice", settings={"num_choices": "3"})).spec
    assert choice.task_settings == {"num_choices": 3}


def test_log_to_goes_into_the_job_as_on_the_command_line(services: Services) -> None:
    assert make_job(services, *form()).spec.report_to == "none"
    job = make_job(services, *form(report_to="tensorboard"))
    parser = build_parser()
    cli = spec_from_args(parser.parse_args(["--task", "classification", "--data", str(SENTIMENT),
                                            "--report-to", "tensorboard"]), parser)
    assert job.spec.report_to == cli.report_to == "tensorboard"
    with pytest.raises(gr.Error, match="Log to must be one of: none, TensorBoard"):
        friendly_errors(make_job)(services, *form(report_to="trackio"))

def test_empty_fields_take_the_tasks_defaults(services: Services) -> None:
    for name, row in finetune_rows().items():
        job = make_job(services, *form(task=name))
        config = job.spec.training_config()
        assert (config.total_steps, config.batch_size, config.learning_rate, config.max_seq_length) == (
            row.defaults["steps"], row.defaults["batch_size"], row.defaults["learning_rate"], row.defaults["seq_length"])
        assert job.spec.eval_fraction == row.defaults["eval_fraction"] and Path(job.spec.data) == row.examples[0].path
    qa = make_job(services, *form(task="qa", seq_length=128)).spec
    assert qa.validate().task == "qa" and qa.settings.max_question_len < 128 - 3 - qa.settings.doc_stride


@pytest.mark.parametrize("changes, message", [
    (dict(task="ner"), "unknown task 'ner'; choose one of: classification, qa, token_classification, multiple_choice"),
    (dict(steps=2.5), "Steps must be a whole number"),
    (dict(learning_rate=0), "Learning rate must be in (0, 1]"),
    (dict(seq_length=512), "Sequence length must be a whole number from 16 to 128"),
    (dict(eval_fraction=0.95), "Held-out fraction must be in [0, 0.9]"),
    (dict(example="imdb.csv"), "There is no bundled example 'imdb.csv' for classification"),
    (dict(model_key="live"), "The live model changes at every step; pick one of its run's checkpoints instead."),
    (dict(data_source="upload"), "Upload a .csv or .tsv or .jsonl file first, or choose the bundled example."),
])
def test_bad_form_values_say_what_to_do(services: Services, changes: dict, message: str) -> None:
    with pytest.raises(gr.Error, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]").replace(".", r"\.")):
        friendly_errors(make_job)(services, *form(**changes))


HOSTILE = [
    ("columns.csv", b"sentence,sentiment\nnice,positive\nbad,negative\n",
     "columns.csv: the header must name the columns text and label"),
    ("labels.csv", b"text,label\nnice day,positive\nbad day,negative\nso so,neutral\n",
     "labels.csv, line 4: the label 'neutral' is not one of the labels you listed"),
    ("one.csv", b"text,label\nnice day,positive\ngreat day,positive\n", "at least two different labels"),
    ("empty.csv", b"", "empty.csv is empty; upload a file with examples in it."),
    ("blank.csv", b"  \n\n", "blank.csv is empty"),
    ("latin1.csv", "text,label\ncaf\u00e9 nice,positive\nbad,negative\n".encode("latin-1"),
     "latin1.csv is not UTF-8 text"),
    ("notes.txt", b"text,label\n", "notes.txt is a .txt file; classification takes .csv or .tsv or .jsonl files."),
    ("big.csv", None, "big.csv is 10.0 MB; the limit is 10 MB"),
]
# the same refusals for the other tasks' files: (task, name, content, message); labels only where they apply
TASK_HOSTILE = [
    ("token_classification", "empty.tsv", b"", "empty.tsv is empty; upload a file with examples in it."),
    ("token_classification", "latin1.conllu", "1\tcaf\u00e9\tcaf\u00e9\tNOUN\t_\t_\t0\t_\t_\t_\n".encode("latin-1"),
     "latin1.conllu is not UTF-8 text"),
    ("token_classification", "big.tsv", None, "big.tsv is 10.0 MB; the limit is 10 MB"),
    ("token_classification", "columns.tsv", b"The\tDET\tx\n", "columns.tsv, line 1: expected a word and its tag"),
    ("token_classification", "noupos.conllu", b"1\tThe\tthe\t_\t_\t_\t0\t_\t_\t_\n",
     "noupos.conllu, line 1: the word 'The' has no UPOS tag (column 4 is '_'); every word needs a tag"),
    ("token_classification", "one-tag.tsv", b"The\tX\ncat\tX\n\nA\tX\n", "tagging needs at least two different tags"),
    ("token_classification", "unknown.tsv", b"The\tDET\ncat\tNOUN\n\nA\tDET\ndog\tNUON\n",
     "the word 'dog' has the tag 'NUON', which is not one of the tags you listed (DET, NOUN)"),
    ("multiple_choice", "empty.csv", b"", "empty.csv is empty; upload a file with examples in it."),
    ("multiple_choice", "latin1.csv", "context,choice0,choice1,label\ncaf\u00e9,a,b,0\n".encode("latin-1"),
     "latin1.csv is not UTF-8 text"),
    ("multiple_choice", "big.csv", None, "big.csv is 10.0 MB; the limit is 10 MB"),
    ("multiple_choice", "columns.csv", b"context,choice0,choice2,label\nIt rained,a,b,0\n",
     "columns.csv, line 1: the header must name context, choice0 .. choiceN-1"),
    ("multiple_choice", "word.csv", b"context,choice0,choice1,label\nIt rained,we got wet,we got dry,two\n",
     "word.csv, line 2: label is 'two'; it must be the index of the right choice, 0 to 1"),
    ("multiple_choice", "range.csv", b"context,choice0,choice1,label\nIt rained,we got wet,we got dry,5\n",
     "range.csv, line 2: label 5 is out of range: there are 2 choices, so it must be 0 to 1"),
    ("multiple_choice", "blank.csv", b"context,choice0,choice1,label\nIt rained,,we got dry,0\n",
     "blank.csv, line 2: choice0 is empty; every choice needs a text"),
    ("qa", "empty.json", b"", "empty.json is empty; upload a file with examples in it."),
    ("qa", "big.json", None, "big.json is 10.0 MB; the limit is 10 MB"),
]
HOSTILE_CASES = [("classification", *h) for h in HOSTILE] + TASK_HOSTILE
LABELS = {"classification": "positive, negative", "unknown.tsv": "DET, NOUN"}     # the labels box, by task or file


@pytest.mark.parametrize("task, name, content, message", HOSTILE_CASES, ids=[f"{h[0]}-{h[1]}" for h in HOSTILE_CASES])
def test_hostile_uploads_are_refused_with_one_clear_sentence(services: Services, tmp_path: Path, task: str, name: str,
                                                             content: bytes | None, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content if content is not None else b"a\tB\n" * (MAX_UPLOAD_BYTES // 4 + 1))
    uploads = services.get_worker().runs_root / "uploads"
    before = set(uploads.iterdir()) if uploads.is_dir() else set()
    with pytest.raises(gr.Error) as caught:
        friendly_errors(make_job)(services, *form(task=task, data_source="upload", data_file=str(path),
                                                  labels=LABELS.get(task, LABELS.get(name, ""))))
    assert message in caught.value.message and str(tmp_path) not in caught.value.message
    assert (set(uploads.iterdir()) if uploads.is_dir() else set()) == before      # nothing kept


def test_a_good_upload_is_kept_by_content_for_the_run(services: Services, tmp_path: Path) -> None:
    upload = tmp_path / "mine.csv"
    upload.write_bytes(SENTIMENT.read_bytes())
    job = make_job(services, *form(data_source="upload", data_file=str(upload), labels="negative, positive"))
    kept = Path(job.spec.data)
    assert kept.parent == services.get_worker().runs_root / "uploads" and kept.name.startswith("mine-")
    assert kept.read_bytes() == SENTIMENT.read_bytes() and job.data_name == "mine.csv"
    again = make_job(services, *form(data_source="upload", data_file=str(upload)))
    assert again.spec.data == job.spec.data                                      # the same file is kept once


def test_api_lists_the_fine_tune_endpoints(client: Client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert "/finetune_start" in endpoints and "/finetune_status" in endpoints
    parameters = endpoints["/finetune_start"]["parameters"]
    assert [p["parameter_name"] for p in parameters][:3] == ["model_key", "task", "data_source"]
    defaults = {p["parameter_name"]: p["parameter_default"] for p in parameters}
    assert defaults["example"] == "" and all(defaults[k] == "" for k in ("steps", "batch_size", "learning_rate",
                                                                             "seq_length", "eval_fraction"))
    assert defaults["report_to"] == "none"


def test_an_upload_through_the_api_is_checked(client: Client, tmp_path: Path) -> None:
    bad = tmp_path / "wrong.csv"
    bad.write_text("sentence,sentiment\nnice,positive\n", encoding="utf-8")
    with pytest.raises(AppError, match="wrong.csv: the header must name the columns text and label"):
        client.predict(data_source="upload", data_file=handle_file(str(bad)), api_name="/finetune_start")


def test_fine_tune_end_to_end_through_the_api(client: Client, services: Services) -> None:
    started = client.predict(model_key="default", task="classification", steps=6, learning_rate=1e-3,
                             api_name="/finetune_start")
    assert "**sentiment.csv**" in started and "labels: negative, positive" in started
    deadline = time.monotonic() + TIMEOUT
    while True:
        status, curves, note, wrong = client.predict(api_name="/finetune_status")
        if status.startswith(("**finished**", "**failed**")):
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    assert status.startswith("**finished**") and "step **6 / 6**" in status and "task **classification**" in status
    # the curves as points (a reset: the charts, then every point; the page draws them)
    loss_chart, metric_chart = curves["charts"]
    assert [s["name"] for s in loss_chart["series"]] == ["train", "held-out"]
    assert curves["points"]["train:loss"][0] == [1, 2, 3, 4, 5, 6] and curves["points"]["eval:eval_classification_loss"]
    assert {"accuracy (train)", "accuracy (held-out)"} <= {s["name"] for s in metric_chart["series"]
                                                          if s["id"] in curves["points"]}
    assert wrong["headers"] == WRONG_COLUMNS
    found = services.get_worker().eval_examples()
    assert found is not None and found.step == 6
    assert len(wrong["data"]) == len(found.wrong) and f"**{len(found.wrong)} of 10** wrong" in note
    assert all(re.fullmatch(r"(negative|positive) → (negative|positive) \(\d[\d.]*%\)", row[1])
               for row in wrong["data"])
    # the fine-tuned model is in the picker, loads, and has the task's head with the file's labels
    checkpoint = services.get_worker().status().last_checkpoint
    assert checkpoint.parent.parent.name.startswith("classification-")
    assert checkpoint_key(checkpoint) in services.registry().available_keys()
    loaded = load_directory(services.registry().folder(checkpoint_key(checkpoint)))
    assert "classifier" in loaded.heads and loaded.config.id2label == {0: "negative", 1: "positive"}
    # the Training tab shows the same run, and says where its curves are
    assert "fine-tuning run" in client.predict(api_name="/train_status")[0]


def test_qa_through_the_api_takes_its_own_defaults_and_fills_the_table_with_questions(client: Client,
                                                                                       services: Services) -> None:
    wait_until_ended(services)
    text = client.predict(task="qa", steps=2, api_name="/finetune_start")    # example, numbers: the task's
    assert "**tiny_squad.json**" in text and "35 questions about 6 contexts" in text
    wait_until_ended(services)
    st = services.get_worker().status()
    assert st.state == "finished" and st.task == "qa", st.message
    config = services.get_worker().trainer.config
    assert (config.max_seq_length, config.batch_size, config.learning_rate) == (128, 8, 5e-5)
    found = services.get_worker().eval_examples()
    assert found is not None and found.task == "qa" and found.wrong       # 2 steps from a random QA head
    assert all(p.text.endswith("?") and p.context for p in found.predictions)
    _, curves, note, wrong = client.predict(api_name="/finetune_status")
    names = {s["name"] for s in curves["charts"][1]["series"] if s["id"] in curves["points"]}   # drawn: with points
    assert {"answer F1 (held-out)", "answer exact match (held-out)", "exact span (held-out)"} <= names
    assert len(wrong["data"]) == len(found.wrong) and " ‖ " in wrong["data"][0][2] and " → " in wrong["data"][0][1]


def test_squad_v2_reports_answerable_and_unanswerable_questions_apart(client: Client, services: Services) -> None:
    wait_until_ended(services)
    text = client.predict(task="qa", example="tiny_squad_v2.json", steps=2, api_name="/finetune_start")
    assert "53 questions about 6 contexts (18 unanswerable" in text
    wait_until_ended(services)
    last = services.get_worker().status().eval_metrics
    assert 0.0 <= last["eval_has_ans_f1"] <= 1.0 and 0.0 <= last["eval_no_ans_f1"] <= 1.0
    status = client.predict(api_name="/finetune_status")[0]
    assert "held-out answer F1" in status and "on answerable questions" in status
    assert "on unanswerable questions" in status and "picked on the held-out questions" in status


def test_a_pretraining_run_is_shown_as_what_it_is(services: Services, monkeypatch) -> None:
    wait_until_ended(services)
    worker = services.get_worker()
    spec = JobSpec(dict(total_steps=100_000, batch_size=4, max_seq_length=32, eval_every=0, checkpoint_every=0),
                   preset="tiny", model_overrides=dict(hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                                       max_position_embeddings=64),
                   documents=[["the cat sat on the mat.", "the dog ran home."]] * 12, vocab_size=200)
    worker.start(spec)
    try:
        status = finetune_status(worker.status())
        assert "A **pretraining** run is" in status and "Training** tab" in status
        with pytest.raises(ValueError, match="The active run is a pretraining run: pause it from the Training tab."):
            finetune_actions.control(services, "pause")
        warned = finetune_actions.start(services, *form())
        assert warned.startswith("⚠️ A pretraining run is already") and worker.status().task == "pretraining"
        # Another browser's start between this tab's check and its own start: the worker's RunActiveError
        # gives the same warning, and the running run is kept.
        real_status, first = worker.status, iter([WorkerStatus("idle", "no training run yet")])
        monkeypatch.setattr(worker, "status", lambda: next(first, None) or real_status())
        raced = finetune_actions.start(services, *form())
        assert re.fullmatch(r"⚠️ A pretraining run is already (preparing|running): the app trains one run at a "
                            r"time\. Stop it in the Training tab before starting another\.", raced.split("\n\n")[0])
        assert worker.status().task == "pretraining" and worker.status().active
    finally:
        worker.stop(wait_s=30)
    assert "The last run was a **pretraining** run" in finetune_status(worker.status())


def test_public_mode_needs_the_admin_token_to_fine_tune(services: Services) -> None:
    from dataclasses import replace

    from explorer.serving.access import AccessPolicy
    from support.probing_helpers import small_app

    wait_until_ended(services)
    public = replace(services, access=AccessPolicy(public=True, admin_token="s3cret"))
    demo = small_app(public, finetune_tab.build)
    fns = {f.api_name: f for f in demo.fns.values()}
    start, pause = fns["finetune_start"], fns["finetune_pause"]
    boxes = [""] * 3                                      # the tasks' settings: doc_stride, max_question_len, num_choices
    assert len(start.inputs) == len(form()) + len(boxes) + 1 and len(pause.inputs) == 1        # the token box
    for token, message in (("", "No admin token was given"), ("guess", "The admin token is wrong")):
        with pytest.raises(gr.Error, match=message):
            start.fn(*form(), *boxes, token)
        with pytest.raises(gr.Error, match=message):
            pause.fn(token)
    before = services.get_worker().status().run_id
    assert "Fine-tuning `default`" in start.fn(*form(steps=1), *boxes, "s3cret")
    assert services.get_worker().status().run_id == before + 1
    wait_until_ended(services)


def test_choosing_a_task_offers_its_example_formats_and_defaults(services: Services) -> None:
    from support.probing_helpers import small_app

    fns = {f.api_name: f.fn for f in small_app(services, finetune_tab.build).fns.values()}
    example, upload, formats, labels, *rest = fns["finetune_task_changed"]("qa")
    numbers, settings = rest[:5], rest[5:]
    assert example.choices == [("tiny_squad.json", ""), ("tiny_squad_v2.json", "tiny_squad_v2.json")]
    assert example.value == ""
    assert upload.file_types == [".json"] and "SQuAD JSON" in formats and labels.visible is False
    assert [n.placeholder for n in numbers] == ["30", "8", "5e-05", "128", "0.2"]     # the task's defaults
    assert all(n.value == "" for n in numbers)
    assert [(s.placeholder, s.visible) for s in settings] == [("32", True), ("32", True), ("", False)]   # a quarter
    example, upload = fns["finetune_source_changed"]("upload")
    assert example.visible is False and upload.visible is True


def test_a_run_on_an_upload_continues_after_the_upload_is_gone(services: Services, tmp_path: Path) -> None:
    """The Training tab's *Continue a run* resumes a fine-tuning run from the kept copy of its data."""
    wait_until_ended(services)
    upload = tmp_path / "mine.csv"
    upload.write_bytes(SENTIMENT.read_bytes())
    spec = make_job(services, *form(data_source="upload", data_file=str(upload), steps=2)).spec
    services.get_worker().start(spec.replace(training=spec.training_config().replace(keep_optimizer_state="newest")))
    wait_until_ended(services)                             # "newest": a finished fine-tune that may go on
    worker = services.get_worker()
    run = worker.status().run_dir.name
    assert worker.status().state == "finished" and worker.status().step == 2
    upload.unlink()                                        # Gradio deletes its temporary files after an hour
    worker.continue_run(run, total_steps=4)
    wait_until_ended(services)
    st = worker.status()
    assert (st.state, st.step, st.run_dir.name) == ("finished", 4, run), st.message


def test_a_finished_fine_tune_keeps_only_the_model_and_continuing_it_says_how_to_go_on(services: Services) -> None:
    """The tab's run ends lean (``keep_optimizer_state="while-running"``): its folder holds no optimizer state and
    is at most 2.5x the base model's weights; the Training tab's *Continue a run* refuses it with one sentence
    naming the checkpoint to start a new fine-tune from, which the form then takes as its base model."""
    from engine.training.runs.state import finished_lean_refusal, has_optimizer_state, read_training_state
    from explorer.training.runs import continue_run

    wait_until_ended(services)
    job = make_job(services, *form(steps=2))
    assert job.spec.training_config().keep_optimizer_state == "while-running"
    finetune_actions.start(services, *form(steps=2))
    wait_until_ended(services)
    status = services.get_worker().status()
    assert status.state == "finished" and status.step == 2, status.message
    run = status.run_dir
    [checkpoint] = [path.parent for path in run.rglob("model.safetensors")]
    assert not has_optimizer_state(read_training_state(checkpoint))
    folder = sum(path.stat().st_size for path in run.rglob("*") if path.is_file())
    weights = (services.registry().folder("default") / "model.safetensors").stat().st_size
    assert folder <= 2.5 * weights, (folder, weights)
    sentence = finished_lean_refusal(run.name, checkpoint.name)
    with pytest.raises(gr.Error) as refused:
        friendly_errors(continue_run)(services, run.name, 4)
    assert refused.value.message == sentence
    again = make_job(services, *form(model_key=checkpoint_key(checkpoint), steps=2))
    assert again.spec.init_from == str(checkpoint)
