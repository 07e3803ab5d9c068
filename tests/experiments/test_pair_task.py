"""The bundled sentence-pair task (assets/examples/qnli-squad-sample.csv) that measures NSP's claimed benefit: it reads
as classification data with pairs, is balanced, every ``entailment`` sentence holds its question's answer and no
``not_entailment`` one does (by the build script's own test), its held-out part is large enough to judge a few
points by, it fits the experiments' sequence length, and Table 5 tests NSP on it."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from engine.data.classification import read_classification_file
from engine.experiments.builtin import experiment
from engine.experiments.definitions import METRICS, Scale
from engine.experiments.evaluation import DOWNSTREAM, downstream_spec
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.tasks.finetuning import CLASSIFICATION
from scripts.make_qnli_sample import ENTAILMENT, NOT_ENTAILMENT, holds_answer, rows

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "assets" / "examples" / "qnli-squad-sample.csv"


def test_the_sample_is_balanced_classification_data_with_pairs() -> None:
    examples = read_classification_file(SAMPLE)
    assert len(examples) >= 400 and all(e.text_pair for e in examples)
    assert Counter(e.label for e in examples) == {ENTAILMENT: len(examples) // 2, NOT_ENTAILMENT: len(examples) // 2}
    assert len({e.text for e in examples}) == len({e.text_pair for e in examples}) == len(examples)  # nothing shared


def test_an_entailment_sentence_holds_the_answer_and_a_not_entailment_one_does_not() -> None:
    for row in rows(SAMPLE.read_text(encoding="utf-8")):
        assert holds_answer(row["text_pair"], row["answer"]) == (row["label"] == ENTAILMENT), row
        assert row["article"] and row["id"], row                                           # attribution


def test_the_held_out_part_can_show_a_few_points_and_pairs_fit_the_sequence() -> None:
    """With 20% held out, at least 150 pairs are judged (one pair is under 0.7 points); almost every pair fits the
    experiments' 64 tokens with the bundled vocabulary (a question and a sentence of at most 12 and 18 words)."""
    task, data, key = DOWNSTREAM["pair_acc"]
    assert (task, data, key) == (CLASSIFICATION.name, SAMPLE, "eval_accuracy")
    spec = downstream_spec("pair_acc", ROOT, ROOT / "unused", Scale(), 0)
    examples = read_classification_file(spec.data)
    assert round(len(examples) * spec.held_out_fraction) >= 150
    tokenizer = WordPieceTokenizer.from_file(ROOT / "assets" / "tokenizer")
    lengths = [len(e.input_ids) for e in tokenizer.encode_batch([(x.text, x.text_pair) for x in examples])]
    assert sum(n <= Scale().seq_length for n in lengths) >= 0.98 * len(lengths)


def test_table5_tests_nsp_on_the_pairs() -> None:
    assert "pair_acc" in METRICS and "QNLI" in METRICS["pair_acc"]
    table5 = experiment("bert-table5")
    claim = next(c for c in table5.claims if c.metric == "pair_acc")
    assert (claim.first, claim.second, claim.kind) == ("mlm-nsp", "mlm", "better") and "88.4" in claim.text
    assert "no sentence-pair task is bundled" not in table5.note
