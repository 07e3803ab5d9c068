"""Server corpora: the files and folders of the allowed corpus folders are offered as ``server:<name>``,
their paths stay on the server, and a key that is not offered (or leads outside) is refused."""
from __future__ import annotations

import pytest

from explorer.server_corpora import CORPUS_DIRS_ENV, server_corpora, server_corpus_path
from explorer.training.text_source import corpus_choices, text_fields


@pytest.fixture
def roots(tmp_path, monkeypatch):
    allowed = tmp_path / "corpora"
    (allowed / "wiki").mkdir(parents=True)
    (allowed / "wiki" / "a.jsonl").write_text('{"text": "One. Two."}\n', encoding="utf-8")
    (allowed / "notes.md").write_text("Some notes.\n", encoding="utf-8")
    (allowed / "table.csv").write_text("a,b\n", encoding="utf-8")
    (allowed / ".hidden").mkdir()
    outside = tmp_path / "private"
    outside.mkdir()
    (allowed / "escape").symlink_to(outside)
    monkeypatch.setenv(CORPUS_DIRS_ENV, str(allowed))
    return allowed


def test_files_and_folders_are_offered_by_key(roots):
    assert sorted(server_corpora()) == ["server:notes.md", "server:wiki"]
    assert corpus_choices() == ["shakespeare", "server:notes.md", "server:wiki"]
    fields = text_fields("builtin", "server:wiki", None, None)
    assert fields == {"corpus": str((roots / "wiki").resolve()), "corpus_label": "server:wiki"}


def test_keys_not_offered_are_refused(roots):
    for key in ("server:escape", "server:table.csv", "server:../private", "server:.hidden"):
        with pytest.raises(ValueError, match="no server corpus"):
            server_corpus_path(key)
    with pytest.raises(ValueError, match="unknown corpus"):
        text_fields("builtin", "/etc", None, None)


def test_a_missing_corpus_folder_offers_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(CORPUS_DIRS_ENV, str(tmp_path / "nowhere"))
    assert server_corpora() == {} and corpus_choices() == ["shakespeare"]


def test_a_server_corpus_trains_and_its_messages_name_only_its_key(roots, tmp_path, monkeypatch):
    from engine.text.tokenizer import WordPieceTokenizer
    from engine.training.jobs.setup import prepare_job
    from explorer.services import Services
    from explorer.training.job import make_spec

    monkeypatch.setenv("BERT_ENGINE_CACHE", str(tmp_path / "cache"))
    lines = [f'{{"text": "The cat sat number {i}. The dog ran to tree {i % 5}. A bird sang."}}' for i in range(40)]
    (roots / "wiki" / "a.jsonl").write_text("\n".join(lines), encoding="utf-8")
    services = Services(tokenizer=WordPieceTokenizer.from_file("assets/default-model"))
    spec = make_spec(services, "tiny", "server:wiki", 100, 200, 32, 4, 1e-3, 2, 0.15, False, True)
    said: list[str] = []
    job = prepare_job(spec.replace(run_dir=str(tmp_path / "run")), lambda message: said.append(message) or True)
    assert job is not None and job.train_data.num_documents == 38
    assert any("server:wiki" in message for message in said)
    assert not any(str(roots) in message for message in said), said


def test_a_link_deep_inside_a_corpus_folder_that_leaves_it_is_never_read(roots, tmp_path):
    secret = tmp_path / "private" / "passwd.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    (roots / "leak" / "deep").mkdir(parents=True)
    (roots / "leak" / "ok.txt").write_text("A fine sentence here.\n", encoding="utf-8")
    (roots / "leak" / "deep" / "passwd.txt").symlink_to(secret)
    assert "server:leak" in server_corpora()                    # listed: its top level looks fine
    with pytest.raises(ValueError, match=r"holds a link that leads outside the corpus folders \(deep/passwd.txt\)"):
        server_corpus_path("server:leak")
    with pytest.raises(ValueError, match="holds a link"):
        text_fields("builtin", "server:leak", None, None)
    (roots / "leak" / "deep" / "passwd.txt").unlink()
    (roots / "leak" / "deep" / "again.txt").symlink_to(roots / "leak" / "ok.txt")   # a link that stays inside
    assert server_corpus_path("server:leak") == (roots / "leak").resolve()


def test_a_corpus_added_after_start_is_offered_when_the_list_opens(roots):
    from explorer.training.text_source import refreshed_corpora

    assert "server:later.txt" not in corpus_choices()
    (roots / "later.txt").write_text("Added while the app was running. It has two sentences.\n", encoding="utf-8")
    update = refreshed_corpora("server:wiki")
    assert "server:later.txt" in [c[0] if isinstance(c, tuple) else c for c in update.choices]
    assert update.value == "server:wiki"
    (roots / "wiki" / "a.jsonl").unlink()
    (roots / "wiki").rmdir()
    assert refreshed_corpora("server:wiki").value == "shakespeare"        # gone: back to the built-in corpus
