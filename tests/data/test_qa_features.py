"""QA training features: SQuAD reading, answer -> token positions, doc_stride windows, HF run_qa.py parity."""
from __future__ import annotations

import json
import random

import pytest
import torch

from engine.data.qa_features import QAExample, build_qa_dataset, check_lengths, read_squad
from engine.text.qa_windows import encode_qa_windows
from tests.conftest import WORDS
from support.finetune_helpers import squad_json, write_squad

pytestmark = pytest.mark.usefixtures("one_thread")


def example(context: str, answer: str, question: str = "what is it ?", occurrence: int = 0) -> QAExample:
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(answer, start + 1)
    return QAExample("q", question, context, [(answer, start)])


def built_windows(tokenizer, ex: QAExample, max_seq_len: int, doc_stride: int,
            max_question_len: int) -> list[tuple[list[int], int, int]]:
    """(input ids, start token, end token) of every window of one question, as ``build_qa_dataset`` makes them."""
    data = build_qa_dataset([ex], tokenizer, max_seq_len, 1, doc_stride, max_question_len, shuffle=False)
    return [(data.rows[k].tolist(), *data.targets[k].tolist()) for k in range(len(data))]


def words(tokenizer, ids: list[int]) -> list[str]:
    return [tokenizer.id_to_token(i) for i in ids]


def context_of(tokens: list[str]) -> list[str]:
    """The context tokens of ``[CLS] question [SEP] context [SEP]``."""
    return tokens[tokens.index("[SEP]") + 1:-1]


def test_answer_maps_to_its_tokens(tiny_tokenizer):
    context = "the cat sat on the mat . the dog played in the big red house ."
    (ids, start, end), = built_windows(tiny_tokenizer, example(context, "big red house"), 64, 16, 16)
    tokens = words(tiny_tokenizer, ids)
    assert tokens[start:end + 1] == ["big", "red", "house"]
    assert tokens.index("[SEP]") < start and end < len(tokens) - 1          # inside the context
    # a repeated word ("the", the one before "dog") is found by its character position, not its text
    (ids, start, end), = built_windows(tiny_tokenizer, example(context, "the", occurrence=2), 64, 16, 16)
    tokens = words(tiny_tokenizer, ids)
    assert start == end and tokens[start:start + 2] == ["the", "dog"]


def test_answer_inside_a_word_piece_takes_the_whole_token(tiny_tokenizer):
    context = "they walked to the house ."
    (ids, start, end), = built_windows(tiny_tokenizer, example(context, "walk"), 64, 16, 16)
    assert start == end and words(tiny_tokenizer, ids)[start] == "walk"      # "walked" = walk ##ed
    (ids, start, end), = built_windows(tiny_tokenizer, example(context, "walked"), 64, 16, 16)
    assert words(tiny_tokenizer, ids)[start:end + 1] == ["walk", "##ed"]


def test_doc_stride_windows_overlap_and_only_windows_holding_the_answer_are_labelled(tiny_tokenizer):
    rng = random.Random(0)
    picked = [rng.choice(WORDS[:20]) for _ in range(60)]
    picked[45:47] = ["blue", "car"]                                          # the only "blue car"
    features = built_windows(tiny_tokenizer, example(" ".join(picked), "blue car"), max_seq_len=24, doc_stride=6,
                       max_question_len=8)
    assert len(features) > 3
    tokens = [words(tiny_tokenizer, ids) for ids, _, _ in features]
    contexts = [context_of(t) for t in tokens]
    for window, before, now in zip(tokens[1:], contexts, contexts[1:]):
        assert len(window) <= 24 and window[0] == "[CLS]"
        assert before[-6:] == now[:6], "consecutive windows share doc_stride context tokens"
    assert any((s, e) != (0, 0) for _, s, e in features), "some window must hold the answer"
    for (_, start, end), window, context in zip(features, tokens, contexts):
        holds = any(context[i:i + 2] == ["blue", "car"] for i in range(len(context) - 1))
        assert ((start, end) != (0, 0)) == holds
        if holds:
            assert window[start:end + 1] == ["blue", "car"]


def test_window_cutting_the_answer_is_labelled_cls(tiny_tokenizer):
    context = "a b c d e f g h i j k l m n o p"
    cut = built_windows(tiny_tokenizer, QAExample("q", "what ?", context, [("g h", context.index("g h"))]), 12, 2, 2)
    first = words(tiny_tokenizer, cut[0][0])
    assert context_of(first)[-1] == "g" and cut[0][1:] == (0, 0)           # runs past the first window
    assert any(words(tiny_tokenizer, ids)[s:e + 1] == ["g", "h"] for ids, s, e in cut[1:])
    (_, start, end), *_ = built_windows(tiny_tokenizer, example(context, "a", question="what ?"), 12, 2, 2)
    assert (start, end) == (1 + 2 + 1, 1 + 2 + 1)                           # [CLS] what ? [SEP] a
    impossible = QAExample("q", "what ?", context, [], is_impossible=True)
    assert all((s, e) == (0, 0) for _, s, e in built_windows(tiny_tokenizer, impossible, 12, 2, 2))


def test_labels_match_hugging_face_run_qa(tiny_tokenizer, tmp_path):
    """run_qa.py's prepare_train_features on transformers' tokenizer, with its start loop kept inside the
    context (run_qa.py runs on into [SEP] when the answer starts at a window's last token)."""
    transformers = pytest.importorskip("transformers")
    tiny_tokenizer.save(tmp_path)
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path)
    rng = random.Random(1)
    windows = 0
    for _ in range(60):
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 60))]
        i = rng.randrange(len(words))
        j = min(len(words), i + rng.randint(1, 4))
        ex = QAExample("x", " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) + " ?",
                       " ".join(words), [(" ".join(words[i:j]), len(" ".join(words[:i])) + (1 if i else 0))])
        ours = built_windows(tiny_tokenizer, ex, 32, 8, 16)
        start_char, end_char = ex.answer_span
        encoded = hf(ex.question, ex.context, truncation="only_second", max_length=32, stride=8,
                     return_overflowing_tokens=True, return_offsets_mapping=True)
        theirs = []
        for k, offsets in enumerate(encoded["offset_mapping"]):
            sequence_ids = encoded.sequence_ids(k)
            token_start = sequence_ids.index(1)
            token_end = len(sequence_ids) - 1 - sequence_ids[::-1].index(1)
            if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
                theirs.append((encoded["input_ids"][k], 0, 0))
                continue
            while sequence_ids[token_start] == 1 and offsets[token_start][0] <= start_char:
                token_start += 1
            while offsets[token_end][1] >= end_char:
                token_end -= 1
            theirs.append((encoded["input_ids"][k], token_start - 1, token_end + 1))
        assert [(list(i), s, e) for i, s, e in ours] == [(list(i), s, e) for i, s, e in theirs]
        windows += len(ours)
    assert windows > 80                        # several contexts span more than one window


def test_dataset_windows_equal_encode_qa_windows(tiny_tokenizer):
    """The batched feature builder gives exactly the windows the QA pipeline encodes (``encode_qa_windows``), labels
    that cover the answer, and the same labels however the questions are chunked."""
    rng = random.Random(2)
    examples = []
    for k in range(9):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 70))] + ["Caf\u00e9", "na\u00efve,", "it."]
        rng.shuffle(words)
        i = rng.randrange(len(words))
        text = " ".join(words[i:i + 2])
        question = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30 if k % 3 == 0 else 5))) + " ?"
        examples.append(QAExample(str(k), question, " ".join(words),
                                  [(text, len(" ".join(words[:i])) + (1 if i else 0))]))
    examples.append(QAExample("none", "what ?", "the cat sat .", [], is_impossible=True))
    data = build_qa_dataset(examples, tiny_tokenizer, 40, 4, doc_stride=10, max_question_len=12, chunk=4)
    expected = [(index, window) for index, ex in enumerate(examples)
                for window in encode_qa_windows(tiny_tokenizer, ex.question, ex.context, 40, 10, 12)]
    assert len(data) == len(expected) > len(examples) + 5
    alone = [(ids, s, e) for ex in examples for ids, s, e in built_windows(tiny_tokenizer, ex, 40, 10, 12)]
    for k, (index, window) in enumerate(expected):
        assert data.rows[k].tolist() == window.input_ids and data.example_index[k] == index
        assert data.segment_starts[k] == window.token_type_ids.index(1)
        assert data.targets[k].tolist() == list(alone[k][1:]), "labels do not depend on the chunking"
        start, end = data.targets[k].tolist()
        if (start, end) != (0, 0):                                          # the labelled tokens cover the answer
            first, last = examples[index].answer_span
            assert window.offsets[start][0] <= first < window.offsets[start][1]
            assert window.offsets[end][0] < last <= window.offsets[end][1]
    assert data.targets[:, 0].astype(bool).sum() >= len(examples) - 1


def test_read_squad_skips_answers_that_do_not_match(tmp_path):
    data = squad_json(num_contexts=2)
    qas = data["data"][0]["paragraphs"][0]["qas"]
    good = dict(qas[0]["answers"][0])
    qas[0]["answers"] = [dict(good, answer_start=good["answer_start"] + 1), good]   # one wrong, one right
    qas.append({"id": "bad", "question": "what ?", "answers": [dict(good, answer_start=0)]})
    qas.append({"id": "none", "question": "who ?", "answers": [], "is_impossible": True})
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data))
    squad = read_squad(path)
    assert squad.skipped_answers == 2 and squad.dropped_questions == 1
    assert [e.id for e in squad.examples] == ["c0q0", "none", "c1q0"]
    assert squad.examples[0].answers == [(good["text"], good["answer_start"])]
    assert squad.examples[1].is_impossible and squad.examples[1].answer_span is None
    assert "skipped 2 answer(s)" in squad.summary()


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"version": "1.1"}', "not SQuAD JSON"),
    ('{"data": [{"title": "t"}]}', "has no list of \"paragraphs\""),
    ('{"data": [{"paragraphs": [{"qas": []}]}]}', "needs a \"context\" string"),
    ('{"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "q"}]}]}]}', "\"answers\" list"),
    ('{"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "q", "answers": [{"text": "c"}]}]}]}]}',
     "answer_start"),
])
def test_read_squad_names_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        read_squad(path)
    with pytest.raises(FileNotFoundError):
        read_squad(tmp_path / "missing.json")


def test_dataset_batches_hold_windows_and_positions(tiny_tokenizer, tmp_path):
    squad = read_squad(write_squad(tmp_path / "squad.json", num_contexts=5))
    data = build_qa_dataset(squad.examples, tiny_tokenizer, 64, batch_size=2, doc_stride=16, max_question_len=16)
    assert len(data) == 5 and data.num_batches(0) == 3 and data.example_index.tolist() == [0, 1, 2, 3, 4]
    batch = data.batch(0, 0)
    assert batch.start_positions.shape == (2,) and batch.class_labels is None
    for row in range(2):
        index = data.order(0)[row]
        ex = squad.examples[index]
        tokens = tiny_tokenizer.backend.id_to_token
        start, end = int(batch.start_positions[row]), int(batch.end_positions[row])
        assert [tokens(int(t)) for t in batch.input_ids[row, start:end + 1]] == ex.answers[0][0].split()
        types = batch.token_type_ids[row][batch.attention_mask[row].bool()]
        sep = tiny_tokenizer.sep_token_id
        first_sep = int((batch.input_ids[row] == sep).nonzero()[0])
        assert types[:first_sep + 1].sum() == 0 and bool((types[first_sep + 1:] == 1).all())
    assert data.order(1) != data.order(0) and data.order(1) == data.order(1)
    assert torch.equal(data.batch(3, 1).input_ids, data.batch(3, 1).input_ids)


def test_lengths_are_checked(tiny_tokenizer):
    specials = tiny_tokenizer.num_special_tokens(True)                    # BERT's [CLS] A [SEP] B [SEP]: 3
    assert specials == 3
    check_lengths(384, 128, 64, specials)
    with pytest.raises(ValueError, match="doc_stride \\(128\\) must be smaller"):
        check_lengths(128, 128, 64, specials)
    with pytest.raises(ValueError, match="max_question_len must be >= 1"):
        check_lengths(128, 16, 0, specials)
    with pytest.raises(ValueError, match="- 3 special tokens of the tokenizer's pair template = 60"):
        check_lengths(128, 60, 65, specials)
    check_lengths(128, 60, 65, 0)             # before the tokenizer is known: 63 tokens of room
