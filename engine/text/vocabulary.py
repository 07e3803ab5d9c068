"""BERT's WordPiece set-up: ``vocab.txt`` read as ``transformers`` reads it, a backend given BERT's layout, and
a vocabulary trained with the ``tokenizers`` trainer, set up as BERT's, with ids in one fixed order."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from engine.regular_files import read_text
from engine.text.special_roles import BERT_TOKENS

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_INPUT_CHARS_PER_WORD = 100
MAX_VOCAB_BYTES = 64 << 20


def bert_normalizer(lowercase: bool) -> normalizers.BertNormalizer:
    """BERT's normalizer: clean text, CJK characters spaced, accents stripped when lower-casing."""
    return normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                      lowercase=lowercase)


def read_vocab_txt(path: Path) -> dict[str, int]:
    """Parse a ``vocab.txt`` the way ``transformers`` does (line number = id); a regular file, size-capped."""
    try:
        lines = read_text(path, MAX_VOCAB_BYTES).splitlines(keepends=True)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not a UTF-8 vocab.txt file: {exc}") from None
    return {line.rstrip("\n"): i for i, line in enumerate(lines)}


def lowercases(described: dict) -> bool:
    """Whether a tokenizer's normalizer lowercases (read from its JSON form)."""
    norm = described.get("normalizer") or {}
    parts = norm.get("normalizers", [norm]) if norm.get("type") == "Sequence" else [norm]
    return any(p.get("type") == "Lowercase" or (p.get("type") == "BertNormalizer" and p.get("lowercase"))
               for p in parts)


def install_bert_layout(backend: Tokenizer, roles: dict[str, str | None], lowercase: bool | None) -> None:
    """A WordPiece backend set up as BERT's: the five roles required, the ``[CLS] A [SEP] B [SEP]``
    post-processor over the cls and sep tokens, BERT's normalizer/pre-tokenizer/decoder where missing."""
    vocab = backend.get_vocab(with_added_tokens=True)
    missing = [str(roles[r]) for r in BERT_TOKENS if roles[r] not in vocab]
    if missing:
        raise ValueError(f"vocabulary lacks the special token(s) {', '.join(missing)}")
    if backend.normalizer is None:
        backend.normalizer = bert_normalizer(True if lowercase is None else lowercase)
    if backend.pre_tokenizer is None:
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    if backend.decoder is None:
        backend.decoder = decoders.WordPiece(prefix="##")
    cls, sep = roles["cls"], roles["sep"]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
    )
    backend.add_special_tokens([roles[r] for r in BERT_TOKENS])


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
