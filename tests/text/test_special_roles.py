"""engine.text.special_roles and engine.text.piece_display: roles read from untrusted files and post-processors,
the layout template, and pieces shown readably."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tokenizers import Tokenizer, processors

from engine.regular_files import NotRegularFile, TooLarge
from engine.text.piece_display import WORD_START, display_piece, is_byte_level
from engine.text.special_roles import (
    MAX_CONFIG_BYTES, configured_tokens, layout_template, processor_tokens, read_tokenizer_config, resolve_roles,
)
from engine.text.tokenizer import WordPieceTokenizer
from tests.support.family_tokenizers import build

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "tokenizer"


def _json_of(processor) -> dict:
    backend = Tokenizer.from_str((ASSETS / "tokenizer.json").read_text(encoding="utf-8"))
    backend.post_processor = processor
    return json.loads(backend.to_str())["post_processor"]


# --- roles from the post-processor and the configuration ---------------------------------------------

def test_processor_tokens_of_each_kind():
    assert processor_tokens(_json_of(processors.RobertaProcessing(("</s>", 2), ("<s>", 0)))) == \
        {"cls": "<s>", "sep": "</s>"}
    assert processor_tokens(_json_of(processors.BertProcessing(("[SEP]", 102), ("[CLS]", 101)))) == \
        {"cls": "[CLS]", "sep": "[SEP]"}
    template = processors.TemplateProcessing(single="<cls> $A <eos>", pair="<cls> $A <eos> <eos> $B <eos>",
                                             special_tokens=[("<cls>", 1), ("<eos>", 2)])
    assert processor_tokens(_json_of(template)) == {"cls": "<cls>", "sep": "<eos>"}
    bos_only = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", 1)])
    assert processor_tokens(_json_of(bos_only)) == {"cls": "<bos>"}
    sequence = processors.Sequence([processors.ByteLevel(), processors.RobertaProcessing(("</s>", 2), ("<s>", 0))])
    assert processor_tokens(_json_of(sequence)) == {"cls": "<s>", "sep": "</s>"}
    assert processor_tokens(None) == {} and processor_tokens(_json_of(processors.ByteLevel())) == {}


def test_resolve_roles_order_and_vocabulary():
    vocab = {"<s>": 0, "</s>": 1, "[MASK]": 2, "<pad>": 3, "[PAD]": 4}
    roberta = {"type": "RobertaProcessing", "sep": ["</s>", 1], "cls": ["<s>", 0]}
    roles = resolve_roles({"pad": "<pad>", "unk": "<unk>", "eos": None}, roberta, vocab)
    assert roles == {"cls": "<s>", "sep": "</s>", "mask": "[MASK]", "pad": "<pad>", "unk": None,
                     "bos": None, "eos": None}
    assert resolve_roles({}, None, {"[CLS]": 0})["cls"] == "[CLS]"             # BERT's names last


def test_configured_tokens_reads_strings_dicts_and_null():
    config = {"cls_token": "<s>", "mask_token": {"content": "<mask>", "lstrip": True}, "pad_token": None,
              "additional_special_tokens": ["x"], "do_lower_case": True}
    assert configured_tokens(config) == {"cls": "<s>", "mask": "<mask>", "pad": None}
    with pytest.raises(ValueError, match="tokenizer_config.json: sep_token must be a string"):
        configured_tokens({"sep_token": 5})
    with pytest.raises(ValueError, match="sep_token"):
        configured_tokens({"sep_token": {"content": ["</s>"]}})


def test_layout_template_from_the_post_processor(tmp_path):
    roberta = WordPieceTokenizer.from_file(build("roberta", tmp_path / "r")).backend
    assert layout_template(roberta, True) == [("special", "<s>"), ("segment", "A"), ("special", "</s>"),
                                              ("special", "</s>"), ("segment", "B"), ("special", "</s>")]
    assert layout_template(roberta, False) == [("special", "<s>"), ("segment", "A"), ("special", "</s>")]
    bare = Tokenizer.from_str(roberta.to_str())
    bare.post_processor = None
    assert layout_template(bare, True) == [("segment", "A"), ("segment", "B")]


# --- the files are untrusted -----------------------------------------------------------------------

@pytest.fixture()
def roberta_folder(tmp_path) -> Path:
    return build("roberta", tmp_path / "roberta")


def test_invalid_json_config_names_the_file(roberta_folder):
    (roberta_folder / "tokenizer_config.json").write_text("{ not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer_config\.json is not valid JSON"):
        WordPieceTokenizer.from_file(roberta_folder)
    with pytest.raises(ValueError, match=r"tokenizer_config\.json"):
        WordPieceTokenizer.from_file(roberta_folder / "tokenizer.json")


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', "null"])
def test_config_must_be_an_object(roberta_folder, content):
    (roberta_folder / "special_tokens_map.json").write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=r"special_tokens_map\.json must hold a JSON object"):
        WordPieceTokenizer.from_file(roberta_folder)


def test_config_that_is_a_folder_is_refused(roberta_folder):
    (roberta_folder / "tokenizer_config.json").unlink()
    (roberta_folder / "tokenizer_config.json").mkdir()
    with pytest.raises(NotRegularFile, match="tokenizer_config.json"):
        WordPieceTokenizer.from_file(roberta_folder)


def test_huge_config_is_refused_without_reading_it_all(roberta_folder):
    with open(roberta_folder / "tokenizer_config.json", "wb") as handle:
        handle.truncate(MAX_CONFIG_BYTES + 1)                      # sparse: no disk used
    with pytest.raises(TooLarge, match="tokenizer_config.json"):
        WordPieceTokenizer.from_file(roberta_folder)


def test_special_files_and_links_are_refused(roberta_folder):
    (roberta_folder / "special_tokens_map.json").symlink_to("/dev/zero")
    with pytest.raises(NotRegularFile):
        read_tokenizer_config(roberta_folder)
    (roberta_folder / "special_tokens_map.json").unlink()
    (roberta_folder / "special_tokens_map.json").symlink_to(roberta_folder / "missing.json")   # dangling
    with pytest.raises(FileNotFoundError):
        read_tokenizer_config(roberta_folder)
    (roberta_folder / "special_tokens_map.json").unlink()
    os.mkfifo(roberta_folder / "special_tokens_map.json")      # would block a plain open(); refused at once
    with pytest.raises(NotRegularFile):
        WordPieceTokenizer.from_file(roberta_folder)


def test_undecodable_config_is_a_value_error(roberta_folder):
    (roberta_folder / "tokenizer_config.json").write_bytes(b"\xff\xfe{\x00")
    with pytest.raises(ValueError, match="tokenizer_config.json"):
        WordPieceTokenizer.from_file(roberta_folder)


def test_a_wordpiece_vocab_txt_reads_its_config_the_same_way(tmp_path):
    (tmp_path / "vocab.txt").write_text((ASSETS / "vocab.txt").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        WordPieceTokenizer.from_file(tmp_path)


# --- pieces shown readably ---------------------------------------------------------------------------

@pytest.mark.parametrize("piece,shown", [
    ("Ġhello", "▁hello"), ("hello", "hello"), ("Ċ", "↵"), ("ĊĊ", "↵↵"), ("ĉ", "⇥"), ("č", "␍"), ("Ġ", "▁"),
    ("ĠĠ", "▁▁"), ("Ã©", "é"), ("ĠcafÃ©", "▁café"), ("ðŁĺĢ", "😀"), ("ðŁĺ", "\\xf0\\x9f\\x98"),
    ("Ā", "\u2400"), ("<s>", "<s>"), ("<mask>", "<mask>"), ("", ""),
])
def test_display_piece_byte_level(piece, shown):
    assert display_piece(piece, byte_level=True) == shown


@pytest.mark.parametrize("piece", ["##ing", "[CLS]", "▁word", "▁", "é", "Ã©", "Ġ", "日本"])
def test_display_piece_leaves_other_kinds_alone(piece):
    assert display_piece(piece) == piece
    assert display_piece("▁x", byte_level=True) == "▁x"       # a character outside the byte table: not bytes
    assert WORD_START == "▁"


def test_display_piece_shows_control_characters_of_any_kind():
    assert display_piece("a\nb\tc") == "a↵b⇥c" and display_piece("x y") == "x y"


def test_is_byte_level_reads_pre_tokenizer_and_decoder():
    assert is_byte_level({"pre_tokenizer": {"type": "ByteLevel"}})
    assert is_byte_level({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split"},
                                                                                 {"type": "ByteLevel"}]}})
    assert is_byte_level({"pre_tokenizer": None, "decoder": {"type": "ByteLevel"}})
    assert not is_byte_level({"pre_tokenizer": {"type": "Metaspace"}, "decoder": {"type": "Metaspace"}})
    assert not is_byte_level({"pre_tokenizer": {"type": "BertPreTokenizer"}, "decoder": None})


def test_the_tokenizer_keeps_added_tokens_as_they_are(tmp_path):
    tok = WordPieceTokenizer.from_file(build("roberta", tmp_path / "r"))
    assert tok.display_piece("<mask>") == "<mask>" and tok.display_piece("Ġworld") == "▁world"
    bert = WordPieceTokenizer.from_file(ASSETS)
    assert bert.display_piece("##ing") == "##ing" and bert.display_piece("Ġ") == "Ġ"
