"""engine.training.runs.fs_checks: file-system questions that answer False where the server cannot look."""
from __future__ import annotations

from engine.training.runs.fs_checks import is_dir, is_file, why


def test_answers_never_raise(tmp_path):
    (tmp_path / "file").write_text("x")
    assert is_file(tmp_path / "file") and not is_dir(tmp_path / "file")
    assert is_dir(tmp_path) and not is_file(tmp_path)
    assert not is_file(tmp_path / "gone") and not is_dir(tmp_path / "gone")
    assert not is_file(tmp_path / "bad\0name") and not is_dir(tmp_path / "bad\0name")     # ValueError inside


def test_why_names_the_error_not_the_path(tmp_path):
    try:
        (tmp_path / "gone").read_text()
    except OSError as exc:
        assert why(exc) == "No such file or directory" and str(tmp_path) not in why(exc)
    assert why(ValueError("embedded null byte")) == "ValueError"
