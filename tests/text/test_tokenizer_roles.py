"""engine.text.tokenizer over the BERT family's descendants: RoBERTa's byte-level BPE, XLM-R's and ALBERT's Unigram,
DistilBERT's WordPiece and a generic tokenizer.json, each folder written by transformers' own class and compared
with ``AutoTokenizer.from_pretrained`` of the same folder: ids, offsets, special masks, sequence ids, type ids,
truncation, QA windows, roles, the shown pieces and the Tokenize tab's layout."""
from __future__ import annotations

import json
import shutil

import pytest

from engine.text.qa_windows import cut_question, encode_qa_windows
from engine.text.tokenizer import WordPieceTokenizer
from tests.support.family_tokenizers import FAMILIES, build

transformers = pytest.importorskip("transformers")

TEXTS = [
    "Hello, world! The quick brown fox.",
    "Café naïve résumé Zürich Ζεύς 日本語",
    "emoji 😀👍🏽 and ❤️ hearts",
    "  extra   spaces\tand\nnew lines  ",
    "supercalifragilisticexpialidocious" * 4 + " short",
    "The capital of France is <mask>. [MASK] [CLS] </s> stay text.",
    "3.14159 $100 user@example.com e-mail don't",
    "",
]
PAIRS = [
    ("What is the capital of France?", "Paris is the capital and largest city of France."),
    ("", "only the second text"),
    ("only the first text", ""),
    ("Café 日本 😀", "punctuation!!!  and   spaces"),
]
ROLE_LIST = ("cls", "sep", "mask", "pad", "unk", "bos", "eos")


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory):
    folder = build(request.param, tmp_path_factory.mktemp(request.param) / "tok")
    hf = transformers.AutoTokenizer.from_pretrained(str(folder))
    return request.param, folder, hf, WordPieceTokenizer.from_file(folder)


def _hf(hf, text, pair=None, **kw):
    return hf(text, pair, return_offsets_mapping=True, return_special_tokens_mask=True, return_token_type_ids=True,
              **kw)


def _assert_same(ours, theirs, hf) -> None:
    assert ours.input_ids == list(theirs["input_ids"])
    assert ours.offsets == [tuple(o) for o in theirs["offset_mapping"]]
    assert ours.special_tokens_mask == list(theirs["special_tokens_mask"])
    assert ours.token_type_ids == list(theirs["token_type_ids"])
    assert ours.attention_mask == list(theirs["attention_mask"])
    assert ours.sequence_ids == theirs.sequence_ids(0)
    assert ours.tokens == hf.convert_ids_to_tokens(ours.input_ids)


def test_transformers_keeps_the_files_pipeline(family):
    """The comparison is meaningful: what transformers runs is the file's own pipeline, which we keep."""
    name, folder, hf, ours = family
    theirs = json.loads(hf.backend_tokenizer.to_str())
    file = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    mine = json.loads(ours.backend.to_str())
    for part in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        assert theirs[part] == file[part]
        if name != "distilbert":
            assert mine[part] == file[part]
    assert ours.is_wordpiece is (name == "distilbert")
    assert ours.byte_level is (name == "roberta")


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_single_texts_match_transformers(family, text):
    _, _, hf, ours = family
    _assert_same(ours.encode(text), _hf(hf, text), hf)


@pytest.mark.parametrize("pair", PAIRS, ids=range(len(PAIRS)))
def test_pairs_match_transformers(family, pair):
    _, _, hf, ours = family
    _assert_same(ours.encode(*pair), _hf(hf, *pair), hf)


def test_pair_layout_and_type_ids(family):
    name, _, _, ours = family
    enc = ours.encode("one two", "three")
    specials = [t for t, s in zip(enc.tokens, enc.sequence_ids) if s is None]
    expected = {"roberta": ["<s>", "</s>", "</s>", "</s>"], "xlmr": ["<s>", "</s>", "</s>", "</s>"],
                "albert": ["[CLS]", "[SEP]", "[SEP]"], "distilbert": ["[CLS]", "[SEP]", "[SEP]"],
                "generic": ["[CLS]", "[SEP]", "[SEP]"]}[name]
    assert specials == expected
    if name in ("roberta", "xlmr"):
        assert set(enc.token_type_ids) == {0}                  # RobertaProcessing / XLM-R's template: all 0
    else:
        assert enc.token_type_ids[-1] == 1 and enc.token_type_ids[0] == 0


@pytest.mark.parametrize("strategy", ["longest_first", "only_first", "only_second"])
@pytest.mark.parametrize("drop", [1, 4, 9])
def test_truncation_matches_transformers(family, strategy, drop):
    _, _, hf, ours = family
    a = "The quick brown fox jumps over the lazy dog near the riverbank, naïvely."
    b = "Unbelievably, it then went home to Zürich 😀 and slept."
    full = ours.encode(a, b, truncation=False)
    assert min(full.sequence_ids.count(0), full.sequence_ids.count(1)) > 9
    max_length = len(full.input_ids) - drop
    ours_enc = ours.encode(a, b, max_length=max_length, truncation_side_pair=strategy)
    _assert_same(ours_enc, _hf(hf, a, b, max_length=max_length, truncation=strategy), hf)
    assert ours_enc.truncated and ours_enc.num_truncated_tokens == drop and len(ours_enc.input_ids) == max_length


@pytest.mark.parametrize("max_length", [8, 13])
def test_short_truncation_matches_transformers(family, max_length):
    _, _, hf, ours = family
    a = "The quick brown fox jumps over the lazy dog near the riverbank, naïvely."
    _assert_same(ours.encode(a, "and more", max_length=max_length),
                 _hf(hf, a, "and more", max_length=max_length, truncation="longest_first"), hf)
    single = ours.encode(a * 3, max_length=max_length)
    _assert_same(single, _hf(hf, a * 3, max_length=max_length, truncation=True), hf)
    assert len(single.input_ids) == max_length


def test_batch_equals_one_by_one(family):
    _, _, hf, ours = family
    pairs = [(t, None) for t in TEXTS] + PAIRS
    for enc, (a, b) in zip(ours.encode_batch(pairs, max_length=16), pairs):
        assert enc == ours.encode(a, b, max_length=16)
        _assert_same(enc, _hf(hf, a, b or None, max_length=16, truncation="longest_first"), hf)


def test_too_small_max_length_counts_the_files_specials(family):
    name, _, _, ours = family
    pair_specials = 4 if name in ("roberta", "xlmr") else 3
    with pytest.raises(ValueError, match=f"need >= {pair_specials + 1}"):
        ours.encode("a b", "c d", max_length=pair_specials)
    assert len(ours.encode("a b c d e", "f g h i", max_length=pair_specials + 1).input_ids) == pair_specials + 1


@pytest.mark.parametrize("max_seq_len,doc_stride", [(40, 0), (48, 8), (64, 16)])
def test_qa_windows_match_transformers(family, max_seq_len, doc_stride):
    _, _, hf, ours = family
    question = "What is the capital of France?"
    context = " ".join(["Paris is the capital and largest city of France, on the river Seine."] * 6 + ["Café 😀!"])
    theirs = hf(question, context, truncation="only_second", max_length=max_seq_len, stride=doc_stride,
                return_overflowing_tokens=True, return_offsets_mapping=True)
    windows = encode_qa_windows(ours, question, context, max_seq_len=max_seq_len, doc_stride=doc_stride)
    assert len(windows) == len(theirs["input_ids"]) > 1
    for i, window in enumerate(windows):
        assert window.input_ids == theirs["input_ids"][i]
        assert window.offsets == [tuple(o) for o in theirs["offset_mapping"][i]]
        assert window.sequence_ids == theirs.sequence_ids(i)
        assert all(0 <= s <= e <= len(context) for (s, e), sid in zip(window.offsets, window.sequence_ids) if sid == 1)


def test_roles_match_transformers(family):
    _, _, hf, ours = family
    for role in ROLE_LIST:
        assert ours.roles[role] == getattr(hf, f"{role}_token"), role
        token_id = getattr(hf, f"{role}_token_id")
        assert (ours.require_token_id(role) if token_id is not None else None) == token_id
    assert (ours.cls_token, ours.sep_token, ours.mask_token, ours.pad_token, ours.unk_token) == \
        (hf.cls_token, hf.sep_token, hf.mask_token, hf.pad_token, hf.unk_token)
    assert (ours.cls_token_id, ours.sep_token_id, ours.mask_token_id, ours.pad_token_id, ours.unk_token_id) == \
        (hf.cls_token_id, hf.sep_token_id, hf.mask_token_id, hf.pad_token_id, hf.unk_token_id)
    assert ours.special_ids() == {getattr(hf, f"{r}_token_id") for r in ROLE_LIST} - {None}


def test_explain_layout_uses_the_roles(family):
    name, _, _, ours = family
    ex = ours.explain("one two three", "four five")
    a, b = (sum(r.segment == s for r in ex.rows) for s in "AB")
    cls, sep = ours.cls_token, ours.sep_token
    middle = f"{sep}{sep}" if name in ("roberta", "xlmr") else sep
    assert ex.layout == f"{cls} A×{a} {middle} B×{b} {sep}"
    assert ours.explain("one").layout == f"{cls} A×{sum(r.segment == 'A' for r in ours.explain('one').rows)} {sep}"
    assert ours.explain("").layout == f"{cls} A×0 {sep}"


def test_explain_cut_pieces_are_what_truncation_drops(family):
    _, _, hf, ours = family
    text, pair = "Tokenization embeddings are fun to watch", "a second segment, somewhat longer than the first one"
    ex = ours.explain(text, pair, max_length=14)
    full = ours.encode(text, pair, truncation=False)
    assert [r.id for r in ex.rows] == list(_hf(hf, text, pair, max_length=14, truncation="longest_first")["input_ids"])
    for seg, sid in (("A", 0), ("B", 1)):
        whole = [i for i, s in zip(full.input_ids, full.sequence_ids) if s == sid]
        assert [r.id for r in ex.rows if r.segment == seg] + [r.id for r in ex.dropped if r.segment == seg] == whole
    assert len(ex.dropped) == ex.num_truncated_tokens == len(full.input_ids) - 14
    assert all(r.text == (text if r.segment == "A" else pair)[r.start:r.end] for r in ex.rows + ex.dropped
               if not r.special)


def test_shown_pieces_read_as_the_text(family):
    """The pieces shown readably spell the text: byte-level ones exactly (a space as the word-start mark ▁, a
    newline as ↵), SentencePiece ones word by word after the file's normalizer; WordPiece ones are untouched."""
    name, _, hf, ours = family
    text = "The quick  brown fox,\nthe café"
    ex = ours.explain(text)
    for row in ex.rows:
        assert row.shown == ours.display_piece(row.token)
    assert all(row.shown == row.token for row in ex.rows if row.special)
    content = [r for r in ex.rows if not r.special]
    shown = [r.text if r.id == ours.unk_token_id else r.shown for r in content]
    if name == "roberta":
        assert any(p.startswith("▁") and p[1:].isalpha() for p in shown) and "↵" in shown
        assert "".join(shown) == text.replace(" ", "▁").replace("\n", "↵")
        assert not any(c in "ĠĊ" for r in ex.rows for c in r.shown)
    elif name == "distilbert":
        assert all(r.shown == r.token for r in ex.rows)
        assert [r.is_continuation for r in content] == [r.token.startswith("##") for r in content]
    else:
        normalizer = ours.backend.normalizer
        expected = normalizer.normalize_str(text) if normalizer is not None else text
        assert "".join(shown).replace("▁", " ").split() == expected.split()
    if name != "distilbert":
        assert not any(r.is_continuation for r in content if r.shown.startswith("▁"))
        assert any(r.is_continuation for r in content)


def test_unknown_pieces_are_named_as_the_unk_token(family):
    name, _, hf, ours = family
    text = "ok ☃☃ ok"
    enc = ours.encode(text)
    if name == "roberta":                                  # byte-level BPE spells any text in bytes
        assert ours.unk_token_id not in enc.input_ids and ours.display_piece(enc.tokens[4]) == "\\xe2"
        return
    assert ours.unk_token_id in enc.input_ids
    assert enc.tokens == hf.convert_ids_to_tokens(enc.input_ids)
    ex = ours.explain(text)
    assert ex.num_unknown >= 1 and [r.text for r in ex.rows if r.token == ours.unk_token][0].strip() != ""


def test_save_and_load_again(family, tmp_path):
    name, _, hf, ours = family
    saved = ours.save(tmp_path / "again")
    if name == "distilbert":
        assert (tmp_path / "again" / "vocab.txt") in saved
    again = WordPieceTokenizer.from_file(tmp_path / "again")
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "again"))
    assert again.roles == ours.roles
    for text, pair in [(t, None) for t in TEXTS] + PAIRS:
        assert again.encode(text, pair) == ours.encode(text, pair)
        _assert_same(again.encode(text, pair), _hf(auto, text, pair), auto)


def test_decode_uses_the_files_decoder(family):
    _, _, hf, ours = family
    for text in TEXTS[:4]:
        ids = ours.encode(text).input_ids
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=True)


# --- roles from the post-processor, and missing roles ------------------------------------------------

def test_roles_from_the_post_processor_alone(tmp_path):
    folder = build("xlmr", tmp_path / "xlmr")
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(folder / "tokenizer.json", bare / "tokenizer.json")     # no tokenizer_config.json
    tok = WordPieceTokenizer.from_file(bare / "tokenizer.json")
    assert (tok.cls_token, tok.sep_token) == ("<s>", "</s>")            # the TemplateProcessing's
    assert tok.mask_token is None and tok.mask_token_id is None and tok.pad_token is None
    assert tok.roles["bos"] is None and tok.roles["eos"] is None
    with pytest.raises(ValueError, match=r"^this tokenizer has no mask token .*\.?"):
        tok.require_token_id("mask")
    with pytest.raises(ValueError, match="unknown special-token role"):
        tok.require_token_id("classifier")
    full = WordPieceTokenizer.from_file(folder)
    assert tok.encode("one two", "three").input_ids == full.encode("one two", "three").input_ids


def test_roberta_processing_roles_and_a_file_without_a_mask(tmp_path):
    folder = build("roberta", tmp_path / "roberta")
    described = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    described["added_tokens"] = [t for t in described["added_tokens"] if t["content"] != "<mask>"]
    del described["model"]["vocab"]["<mask>"]
    bare = tmp_path / "nomask"
    bare.mkdir()
    (bare / "tokenizer.json").write_text(json.dumps(described), encoding="utf-8")
    tok = WordPieceTokenizer.from_file(bare)
    assert (tok.cls_token, tok.sep_token, tok.mask_token, tok.unk_token) == ("<s>", "</s>", None, None)
    assert tok.special_ids() == {tok.cls_token_id, tok.sep_token_id}
    assert tok.explain("a b", "c").layout.startswith("<s> A×")
    (bare / "tokenizer_config.json").write_text(json.dumps({"mask_token": None, "pad_token": {"content": "<pad>"}}))
    named = WordPieceTokenizer.from_file(bare)
    assert named.pad_token == "<pad>" and named.pad_token_id == described["model"]["vocab"]["<pad>"]
    assert named.mask_token is None


def test_special_tokens_map_overrides_tokenizer_config(tmp_path):
    folder = build("albert", tmp_path / "albert")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "pad_token": "[MASK]"}))
    (folder / "special_tokens_map.json").write_text(json.dumps({"pad_token": {"content": "<pad>", "lstrip": False}}))
    assert WordPieceTokenizer.from_file(folder).pad_token == "<pad>"


@pytest.mark.parametrize("max_question_len", [3, 7, 12])
def test_a_long_question_is_cut_to_its_first_pieces(family, max_question_len):
    _, _, _, ours = family
    question = "Which famous painter, born in Zürich naïvely, painted the unbelievable portrait of the robot?"
    asked = ours.backend.encode(question, add_special_tokens=False).ids
    windows = encode_qa_windows(ours, question, "Paris is the capital of France.", max_seq_len=64, doc_stride=8,
                                max_question_len=max_question_len)
    kept = [i for i, s in zip(windows[0].input_ids, windows[0].sequence_ids) if s == 0]
    assert kept == asked[:len(kept)] and max_question_len - 2 <= len(kept) <= max_question_len
    assert ours.backend.encode(cut_question(ours, question, max_question_len), add_special_tokens=False).ids == kept
    if ours.is_wordpiece or max_question_len < 11:              # no piece boundary inside a character ("ü")
        assert len(kept) == max_question_len
    assert cut_question(ours, question, 500) == question
