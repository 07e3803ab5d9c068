"""engine.data.data_files: the text of a data file, its CSV reader and its errors, each naming the file and line."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from engine.data.data_files import csv_errors, csv_reader, read_data_text, shown_columns


def test_a_field_as_long_as_the_text_is_read_and_the_limit_is_never_lowered(tmp_path: Path) -> None:
    field = "x" * 300_000                                  # over csv's default limit of 131,072 characters
    reader = csv_reader(f'a,b\n"{field}",1\n', tmp_path / "data.csv")
    with csv_errors(tmp_path / "data.csv", reader):
        rows = list(reader)
    assert rows == [{"a": field, "b": "1"}] and csv.field_size_limit() > 300_000
    limit = csv.field_size_limit()
    assert list(csv_reader("a\tb\n1\t2\n", "small.tsv")) == [{"a": "1", "b": "2"}]      # .tsv: tab-separated
    assert csv.field_size_limit() == limit


def test_a_csv_error_names_the_file_and_the_line(tmp_path: Path) -> None:
    limit = csv.field_size_limit()
    reader = csv_reader("a,b\n1,2\n" + "x" * 20 + ",3\n", tmp_path / "data.csv")
    csv.field_size_limit(10)                               # what csv_reader prevents: a field over the limit
    try:
        with pytest.raises(ValueError) as caught:
            with csv_errors(tmp_path / "data.csv", reader):
                list(reader)
    finally:
        csv.field_size_limit(limit)
    assert str(caught.value) == ("data.csv, line 3: the file is not valid CSV (field larger than field limit (10)); "
                                 "check the quotes and separators on that line")


def test_shown_columns_are_few_and_short() -> None:
    assert shown_columns([]) == "no header"
    assert shown_columns(["text", "y" * 100]) == "text, " + "y" * 39 + "…"
    assert shown_columns([f"c{i}" for i in range(15)]) == ", ".join(f"c{i}" for i in range(12)) + " and 3 more"


def test_read_data_text_names_the_line_of_a_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(b"text,label\nok,1\ncaf\xe9,2\n")
    with pytest.raises(ValueError, match="^data.csv, line 3: not UTF-8 text \\(byte 0xe9\\)"):
        read_data_text(path)
