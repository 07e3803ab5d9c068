"""Training a WordPiece vocabulary with the ``tokenizers`` trainer, set up as BERT's, with ids in one fixed order."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_INPUT_CHARS_PER_WORD = 100


def bert_normalizer(lowercase: bool) -> normalizers.BertNormalizer:
    """BERT's normalizer: clean text, CJK characters spaced, accents stripped when lower-casing."""
    return normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                      lowercase=lowercase)


def check_text(value: object, name: str) -> None:
    """``TypeError`` naming ``name`` unless ``value`` is a str."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")


def canonical_ids(vocab: dict[str, int]) -> dict[str, int]:
    """The tokens renumbered in one fixed order (specials, characters, ``##`` + a character, longer pieces by
    length and text). The ``tokenizers`` trainer numbers tokens of equal count in an order that changes from run
    to run (its hash maps are seeded at random), and may even keep a different piece among candidates of equal
    count; WordPiece never reads ids, so this order changes no tokenization and makes one set of tokens have the
    same ids everywhere. Processes that must agree use one trained vocabulary (the cache's, or rank 0's)."""
    rest = sorted((t for t in vocab if t not in SPECIAL_TOKENS),
                  key=lambda t: (len(t) != 1, not (t.startswith("##") and len(t) == 3), len(t), t))
    return {token: i for i, token in enumerate([t for t in SPECIAL_TOKENS if t in vocab] + rest)}


def train_vocabulary(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2, lowercase: bool = True,
                     progress: Callable[[float, str], None] | None = None, length: int | None = None,
                     limit_alphabet: int | None = 1000) -> dict[str, int]:
    """Token -> id of a WordPiece vocabulary trained on ``texts``, the BERT special tokens first (ids 0..4).

    ``progress(fraction, message)`` is called at the start and about ten times while texts are read (every
    tenth of ``length`` texts, fractions up to 0.8; every 100,000 texts when ``length`` is not given).
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be > {len(SPECIAL_TOKENS)}, got {vocab_size}")
    if min_frequency < 0:
        raise ValueError(f"min_frequency must be >= 0, got {min_frequency}")
    report = progress or (lambda fraction, message: None)
    every = max(1, length // 10) if length else 100_000

    def stream() -> Iterator[str]:
        count = 0
        for count, text in enumerate(texts, start=1):
            check_text(text, "every training text")
            yield text
            if count % every == 0:
                fraction = 0.8 * min(1.0, count / length) if length else 0.0
                report(fraction, f"read {count:,} texts")
        report(0.8, f"read {count:,} texts; building the vocabulary")

    report(0.0, "starting WordPiece training")
    backend = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
    backend.normalizer = bert_normalizer(lowercase)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
        special_tokens=list(SPECIAL_TOKENS), limit_alphabet=limit_alphabet,
        continuing_subword_prefix="##",
    )
    backend.train_from_iterator(stream(), trainer=trainer, length=length)
    return canonical_ids(backend.get_vocab())
