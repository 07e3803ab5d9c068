"""Build the data pack a GPU session carries (docs/design/gpu-session.md), from ``../shared/data``.

    python scripts/gpu_data_pack.py                 # -> .gpu/pack/ (ignored by git), at most 8,000,000 bytes

Wikipedia training articles as xz-compressed WordPiece ids, a seeded sample of SQuAD training paragraphs as
xz-compressed JSON and a fixed held-out sample (the model card's held-out articles only). It prints how many
training tokens one packed byte holds as ids and as text (the reason for ids), how exactly the ids decode back
into the engine's sentences, and what the device call will carry in all (it must stay under 64 MiB).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.text.tokenizer import WordPieceTokenizer  # noqa: E402
from scripts.gpu import pack_build  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="the shared data folder")
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu" / "pack", help="the pack folder (default .gpu/pack)")
    parser.add_argument("--tokenizer", type=Path, default=ROOT / "assets" / "default-model",
                        help="the vocabulary of the model the session trains (default: the bundled model's)")
    parser.add_argument("--budget-bytes", type=int, default=8_000_000, help="the whole pack (default 8,000,000)")
    parser.add_argument("--squad-bytes", type=int, default=2_000_000, help="of which SQuAD (default 2,000,000)")
    parser.add_argument("--heldout-paragraphs", type=int, default=400)
    parser.add_argument("--heldout-questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not (args.data / "squad").is_dir() or not (args.data / "enwiki-2015-wikiextractor").is_dir():
        parser.error(f"{args.data} does not hold squad/ and enwiki-2015-wikiextractor/")
    tokenizer = WordPieceTokenizer.from_file(args.tokenizer)
    info = pack_build.build(args.data, args.out, tokenizer, args.budget_bytes, args.squad_bytes,
                            args.heldout_paragraphs, args.heldout_questions, seed=args.seed)
    c, r = info["compression"], info["roundtrip"]
    print(f"tokens per packed byte: ids {c['ids_tokens_per_byte']:.3f}, text {c['text_tokens_per_byte']:.3f} "
          f"(xz, on {c['sample_text_bytes']:,} bytes of the training text)")
    print(f"decoded back: {r['ids_identical']:.1%} of {r['documents_checked']} articles give the same ids, "
          f"{r['sentences_identical']:.1%} the same sentences")
    print(f"pack {args.out}: {info['total_bytes']:,} bytes; wiki {info['wiki']['documents']:,} articles, "
          f"{info['wiki']['tokens']:,} tokens; squad {info['squad']['questions']:,} questions in "
          f"{info['squad']['paragraphs']:,} paragraphs; held out {info['heldout']['wiki_paragraphs']} paragraphs, "
          f"{info['heldout']['squad_questions']} questions")
    tree = pack_build.travelling_tree_bytes(ROOT, args.out)
    print(f"the device call carries {tree / 2**20:.1f} MiB of its 64 MiB (tracked + untracked files + the pack)")
    if info["total_bytes"] > args.budget_bytes or tree > pack_build.TREE_LIMIT:
        print("too large: lower --budget-bytes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
