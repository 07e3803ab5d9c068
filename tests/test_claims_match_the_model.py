"""What the text says the bundled default model answers is what it answers: the tabs' intros and examples, the
README, docs/BENCHMARKS.md's demo lines and the model card, each claim run through the model on the CPU.

The words, ranks and percentages are read from the prose itself (a percentage to the precision it is written
with), so a retrained model that answers otherwise fails here until the text says what it does now. What the
model *should* answer (the right word of an example, a real next sentence) is written here, as a reader would
judge it; nothing here is an earlier output of the model."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR, load
from engine.model.loaded_model import LoadedModel
from engine.probes import inference
from engine.probes.heads.joint_fill import joint_fill
from engine.probes.heads.squad_metric import f1_score, normalize_answer
from explorer.fill_mask import tab as fill_mask_tab
from explorer.heads import next_sentence
from explorer.heads import tab as heads_tab
from explorer.qa.examples import EXAMPLES as QA_EXAMPLES
from explorer.qa.tab import pipeline_json
from explorer.tokenize.tab import summary_markdown
from explorer.why import actions as why_actions
from explorer.why import tab as why_tab

ROOT = Path(__file__).resolve().parents[1]
README, CARD, BENCHMARKS, API = ROOT / "README.md", DEFAULT_MODEL_DIR / "README.md", ROOT / "docs" / "BENCHMARKS.md", \
    ROOT / "docs" / "API.md"
TOP_K = 40                      # the deepest rank any text names is 26th
pytestmark = pytest.mark.usefixtures("one_thread")   # one forward at a time: steadier on a busy machine


def prose(path: Path) -> str:
    """The file's text with every line break and indent as one space (claims run across lines)."""
    return re.sub(r"\s*\n\s*", " ", path.read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def model() -> LoadedModel:
    return load("default")


@lru_cache(maxsize=None)
def fills(text: str, targets: tuple[str, ...] = ()) -> tuple[tuple[str, float], ...]:
    """(word, probability) best first, one forward per sentence: the top 40, or the targets only."""
    found = inference.fill_mask(model(), text, len(targets) or TOP_K, list(targets) or None)
    return tuple((guess["token_str"], guess["score"]) for guess in found)


def top_word(text: str) -> str:
    return fills(text)[0][0]


def answer_of(question: str, context: str) -> str:
    return inference.answer(model(), question, context)["answer"]


# --- fill-mask sentences in the docs: '"... [MASK] ..." gives *a* (64%), then *b* (25%); *c* is 26th (0.6%)' ---

@dataclass(frozen=True)
class Fill:
    """One thing a text says of one word for one sentence."""

    where: str
    sentence: str
    word: str
    rank: int | None = None           # its place in the model's list, from 1
    percent: str | None = None        # its probability as written ("64", "0.6")
    in_top: int | None = None         # "has *w* in its top 5"
    out_of_top: int | None = None     # "no longer has *w* in its top 5"

    def __str__(self) -> str:
        return f"{self.where}: {self.sentence} {self.word}"


QUOTED_MASK = re.compile(r'"([^"`|*#]{0,120}\[MASK\][^"`|*#]{0,120})"')     # a sentence, not code between quotes
STARRED = re.compile(r"\*([^*]+)\*(?: \((\d+(?:\.\d+)?)%( each)?)?")
CLAUSE_END = re.compile(r"[;:]|\.(?:\s|$)")


def segments(text: str) -> list[tuple[str, str]]:
    """(quoted sentence, what follows it up to the next quoted sentence or bullet) for every '"...[MASK]..."'."""
    found = list(QUOTED_MASK.finditer(text))
    out = []
    for here, after in zip(found, [*found[1:], None]):
        rest = text[here.end():after.start() if after else len(text)]
        out.append((here.group(1), re.split(r"\s-\s|\s\|", rest)[0]))
    return out


def gives_clause(where: str, sentence: str, rest: str) -> list[Fill]:
    """'gives *a* (64%), then *b* and *c* (2% each)': the words in order are ranks 1, 2, 3."""
    if not rest.startswith(" gives "):
        return []
    clause = rest[len(" gives "):]
    end = CLAUSE_END.search(clause)
    items: list[list] = []
    for starred in STARRED.finditer(clause[:end.start() if end else len(clause)]):
        words, percent, each = [w.strip() for w in starred.group(1).split(",")], starred.group(2), starred.group(3)
        items += [[word, None] for word in words]
        items[-1][1] = percent
        if each:                                              # "*france* and *paris* (2% each)"
            for item in reversed(items[:-1]):
                if item[1] is not None:
                    break
                item[1] = percent
    return [Fill(where, sentence, word, rank, percent) for rank, (word, percent) in enumerate(items, 1)]


def other_claims(where: str, sentence: str, rest: str) -> list[Fill]:
    """'*w* is 26th (0.6%', '(no longer) has *w* in its top 5 (26th', '(2%, after *v*)'."""
    claims = [Fill(where, sentence, word, int(rank), percent) for word, rank, percent in
              re.findall(r"\*(\w+)\* is (\d+)(?:st|nd|rd|th) \((\d+(?:\.\d+)?)%", rest)]
    for no, word, top, rank in re.findall(r"^ (no longer )?has \*(\w+)\* in its top (\d+)(?: \((\d+)(?:st|nd|rd|th))?",
                                          rest):
        claims.append(Fill(where, sentence, word, int(rank) if rank else None,
                           out_of_top=int(top) if no else None, in_top=None if no else int(top)))
        after = re.search(r"\((\d+(?:\.\d+)?)%, after \*(\w+)\*\)", rest)
        if after:
            claims += [Fill(where, sentence, word, percent=after.group(1)), Fill(where, sentence, after.group(2),
                                                                                     in_top=int(top))]
    return claims


def fill_claims() -> list[Fill]:
    claims = []
    for path in (CARD, BENCHMARKS):
        where = path.relative_to(ROOT).as_posix()
        for sentence, rest in segments(prose(path)):
            claims += gives_clause(where, sentence, rest) + other_claims(where, sentence, rest)
    return claims


def rank_of(word: str, ranked: tuple[tuple[str, float], ...]) -> int | None:
    return next((i for i, (w, _) in enumerate(ranked, 1) if w == word), None)


@pytest.mark.parametrize("claim", fill_claims(), ids=str)
def test_each_fill_mask_word_rank_and_percentage_the_docs_give(claim: Fill) -> None:
    ranked = fills(claim.sentence)
    rank = rank_of(claim.word, ranked)
    shown = [(w, round(100 * p, 2)) for w, p in ranked[:max(rank or 0, 8)]]
    assert rank is not None, f"{claim.word!r} is not in the model's top {TOP_K}: {shown}"
    if claim.rank is not None:
        assert rank == claim.rank, (claim.word, rank, shown)
    if claim.percent is not None:                # to the precision written: "64%" is 63.5-64.5%
        decimals = len(claim.percent.partition(".")[2])
        assert abs(100 * ranked[rank - 1][1] - float(claim.percent)) <= 0.5 * 10 ** -decimals + 1e-4, shown
    if claim.in_top is not None:
        assert rank <= claim.in_top, shown
    if claim.out_of_top is not None:
        assert rank > claim.out_of_top, shown


def test_every_fill_mask_sentence_of_the_card_and_benchmarks_is_checked() -> None:
    """The parser above reads each example sentence of the card's weaknesses and of BENCHMARKS.md's demo lines (a
    new one written so that it cannot read it fails here, rather than go unchecked)."""
    text = prose(CARD)
    weaknesses = text[text.index("**Fill-mask is modest.**"):text.index("**QA is moderate.**")]
    sentences = {s for s, _ in segments(weaknesses)}
    checked = {c.sentence for c in fill_claims() if c.where.endswith("default-model/README.md")}
    assert len(sentences) >= 7 and sentences <= checked, sentences - checked
    assert {c.sentence for c in fill_claims() if c.where == "docs/BENCHMARKS.md"} >= set(
        s for s, rest in segments(text_between(BENCHMARKS, "- **Fill-mask:**", "The model card")))


def text_between(path: Path, start: str, end: str) -> str:
    text = prose(path)
    begin = text.index(start)
    return text[begin:text.index(end, begin)]


# --- QA sentences in the card and BENCHMARKS.md -------------------------------------------------------------------

EIFFEL = "The Eiffel Tower is a wrought-iron tower in Paris, built for the 1889 World's Fair."
CURIE = "Marie Curie was a physicist and chemist who discovered polonium and radium with her husband Pierre."
QA_CLAIMS = [   # (file, the words it writes, question, context, the answer those words say)
    (CARD, "Jim Henson (*a nice puppet*, with the sentence's full stop when the context has one)",
     "Who was Jim Henson?", "Jim Henson was a nice puppet.", "a nice puppet."),
    (CARD, "Jim Henson (*a nice puppet*, with the sentence's full stop when the context has one)",
     "Who was Jim Henson?", "Jim Henson was a nice puppet", "a nice puppet"),
    (CARD, "Eiffel Tower (Paris, 1889)", "Where is the Eiffel Tower?", EIFFEL, "Paris"),
    (CARD, "Eiffel Tower (Paris, 1889)", "When was the tower built?", EIFFEL, "1889"),
    (CARD, "Marie Curie (*polonium and radium*)", "What did Marie Curie discover?", CURIE, "polonium and radium"),
    (BENCHMARKS, 'Asked "Who was Jim Henson?" about "Jim Henson was a nice puppet", it answers *a nice puppet*',
     "Who was Jim Henson?", "Jim Henson was a nice puppet", "a nice puppet"),
    (BENCHMARKS, '"Where is the Eiffel Tower?" gives *Paris*', "Where is the Eiffel Tower?", EIFFEL, "Paris"),
]


@pytest.mark.parametrize(("path", "words", "question", "context", "expected"), QA_CLAIMS,
                         ids=[f"{p.relative_to(ROOT).as_posix()}: {q} {e}" for p, _, q, _, e in QA_CLAIMS])
def test_each_qa_answer_the_docs_give(path: Path, words: str, question: str, context: str, expected: str) -> None:
    assert words in prose(path)
    assert answer_of(question, context) == expected


# --- the README ---------------------------------------------------------------------------------------------------

def test_the_readmes_demo_answers() -> None:
    """'("Who was Jim Henson?" → *a nice puppet*; "The United [MASK] of America." → *states*)'."""
    claims = re.findall(r'"([^"]+)" → \*([^*]+)\*', prose(README))
    contexts = dict(QA_EXAMPLES)
    assert len(claims) >= 2 and any("[MASK]" in text for text, _ in claims), claims
    for text, expected in claims:
        got = top_word(text) if "[MASK]" in text else answer_of(text, contexts[text])
        assert normalize_answer(got) == normalize_answer(expected), (text, got)


@pytest.mark.parametrize("path", [README, API], ids=["README.md", "docs/API.md"])
def test_the_api_examples_printed_tokens_and_answer_offsets(path: Path) -> None:
    """The /tokenize summary and /answer's start, end and places, as the example's comments print them."""
    text = path.read_text(encoding="utf-8")
    tok = re.search(r'text="([^"]+)", text_pair="([^"]+)", api_name="/tokenize"\)\n'
                    r"print\(summary\)\s+# (.+) \.\.\. (.+)", text)
    summary = summary_markdown(inference.tokenize(model(), tok.group(1), tok.group(2)))
    assert summary.startswith(tok.group(3)) and summary.rstrip().endswith(tok.group(4)), summary
    ask = re.search(r'question="([^"]+)", context="([^"]+)", api_name="/answer"\)\nprint\(answers\)\s+# (\{.*\})', text)
    returned = pipeline_json(inference.answer_details(model(), ask.group(1), ask.group(2)))
    start, end = (int(re.search(rf"'{key}': (\d+)", ask.group(3)).group(1)) for key in ("start", "end"))
    assert (returned["start"], returned["end"]) == (start, end)
    assert f"'places': {[list(p) for p in returned['places']]}" in ask.group(3)


def test_the_readmes_model_size_and_held_out_figures_are_the_cards() -> None:
    readme, card, config = prose(README), prose(CARD), model().model.config
    millions = round(sum(p.numel() for p in model().model.parameters()) / 1e6, 1)
    assert f"{millions}M parameters" in readme and f"{millions}M parameters" in card
    assert f"a {config.num_hidden_layers}-layer MiniLM" in readme
    row = re.search(r"\| \*\*[^|]*this model\*\* \| \*\*([\d.]+)%\*\* \| \*\*([\d.]+)%\*\* \| \*\*([\d.]+)\*\* \| "
                    r"\*\*([\d.]+)\*\* \|", card)
    top1, top5, em, f1 = row.groups()
    assert f"**{top1}%** of masked Wikipedia tokens right at top-1 ({top5}% top-5" in readme
    assert f"**{em} / {f1}** exact match / F1" in readme


def test_the_cards_architecture_is_the_models() -> None:
    config, card = model().model.config, prose(CARD)
    shape = re.search(r"BERT, (\d+) layers, hidden (\d+), (\d+) heads, intermediate ([\d,]+), (\d+) positions", card)
    assert [int(n.replace(",", "")) for n in shape.groups()] == [
        config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size,
        config.max_position_embeddings]
    assert f"{config.vocab_size:,} tokens" in card
    assert set(model().model.heads) == {"mlm", "nsp", "qa"}
    assert "masked LM (tied to the word embeddings), next-sentence prediction, extractive QA span head" in card


def test_the_readmes_gpu_figures_are_the_records_of_the_gpu_session() -> None:
    """Every number of the README's GPU run is in docs/BENCHMARKS.md or the model card (the session's records)."""
    ran = re.search(r"- \*\*Run on one H200\*\*(.*?) Not run on a GPU yet", prose(README)).group(1)
    records = prose(BENCHMARKS) + prose(CARD)
    numbers = re.findall(r"\d[\d,]*(?:\.\d+)?(?:e-\d+)?", re.sub(r"\]\([^)]*\)", "]", ran))
    assert len(numbers) >= 12, numbers
    assert not [n for n in numbers if n not in records], "the README's GPU figures not in the records"
    assert "passed all 10 checks on `cuda`" in records


# --- the tabs' intros and examples ---------------------------------------------------------------------------------

def starred_list(text: str, after: str) -> list[str]:
    found = re.search(re.escape(after) + r" \(([^)]*)\)", text)
    assert found, after
    return re.findall(r"\*(\w+)\*", found.group(1))


def test_fill_mask_the_first_examples_are_filled_as_the_intro_says() -> None:
    """'The first examples are ones the small bundled model gets right (*states*, *door*, *water*)': each is the
    model's top word, and of an example's targets too."""
    intro = prose_of(fill_mask_tab.INTRO)
    right = starred_list(intro, "gets right")
    assert right == ["states", "door", "water"]                         # what a reader would fill in
    for (text, targets), word in zip(fill_mask_tab.EXAMPLES, right):
        assert top_word(text) == word, (text, fills(text)[:5])
        if targets:
            assert fills(text, tuple(fill_mask_tab.parse_targets(targets)))[0][0] == word


def test_fill_mask_the_last_examples_are_the_misses_the_intro_names() -> None:
    """'the last ones it misses: filled together, two masks give *paris is the city of paris*, and famous phrases
    lose (*located* before *paris*, *help* before *meet*)'."""
    intro = prose_of(fill_mask_tab.INTRO)
    misses = fill_mask_tab.EXAMPLES[len(starred_list(intro, "gets right")):]
    pairs = dict(re.findall(r"\*(\w+)\* before \*(\w+)\*", intro))       # the model's word -> the famous one
    together = re.search(r"two masks give \*([^*]+)\*", intro).group(1)
    assert pairs and misses
    for text, targets in misses:
        assert targets == ""
        if text.count("[MASK]") > 1:
            assert joint_fill(model(), text).sequence.rstrip(".") == together
        else:
            top = top_word(text)
            assert top in pairs and rank_of(pairs[top], fills(text)) > 1, (text, fills(text)[:5])
            pairs.pop(top)
    assert not pairs, f"the intro names misses no example shows: {pairs}"


def test_why_the_intros_right_guess_and_famous_miss() -> None:
    intro = prose_of(why_tab.INTRO)
    task, text, *_ = why_actions.EXAMPLES[0]
    assert task == "fill_mask" and [top_word(text)] == starred_list(intro, "gets right")
    word, famous = re.search(r"\*(\w+)\* before \*(\w+)\*", intro).groups()
    france = [example for example in why_actions.EXAMPLES if example[0] == "fill_mask" and "France" in example[1]]
    assert france and all(top_word(example[1]) == word for example in france)
    assert [example[3] for example in france if example[3]] == [famous] and f"why not *{famous}*" in intro


def test_why_the_qa_and_next_sentence_examples_are_answered_right() -> None:
    for task, text, pair, *_ in why_actions.EXAMPLES:
        if task == "qa_start":                                         # "What is the capital of France?"
            assert answer_of(text, pair) == "Paris"
        elif task == "next_sentence":                                  # a real next sentence
            assert inference.next_sentence(model(), text, pair).is_next > 0.5


def test_heads_the_default_model_has_the_heads_the_intro_names() -> None:
    assert "has the pretraining heads (masked LM, next sentence) and a QA head" in prose_of(heads_tab.INTRO)
    assert set(model().model.heads) == {"mlm", "nsp", "qa"}


# Which examples' B really follows A (written here as a reader judges them): a real next, then a random one.
REAL_NEXT = [True, False, True, False]


def test_next_sentence_examples_get_the_right_verdict() -> None:
    assert len(next_sentence.EXAMPLES) == len(REAL_NEXT)
    verdicts = [inference.next_sentence(model(), a, b).is_next for a, b in next_sentence.EXAMPLES]
    assert [p > 0.5 for p in verdicts] == REAL_NEXT, verdicts


QA_GOLD = {"Who was Jim Henson?": "a nice puppet",                     # what the contexts say
           "Where do puffins nest?": "in burrows dug into the grassy tops of sea cliffs",
           "When was the lighthouse on Gull Point finished?": "1796"}


def test_qa_examples_are_answered_right() -> None:
    assert [question for question, _ in QA_EXAMPLES] == list(QA_GOLD)
    for question, context in QA_EXAMPLES:
        got = answer_of(question, context)
        assert f1_score(got, QA_GOLD[question]) >= 0.8, (question, got)


def prose_of(text: str) -> str:
    """An intro as one line, glossary links read as their words."""
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"\s*\n\s*", " ", text)
