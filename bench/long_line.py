"""A corpus of one gigantic line against an ordinary one: peak memory of reading and tokenising it.

Issue 38: a 50 MB corpus with no newline peaked at 4.0 GB (200 MB passed 9 GB), because a line was read whole
and a block of text became one document. The reader now takes a line in pieces of at most 1 MB and cuts a
block into documents of at most 1 MB, so the peak should not depend on the corpus's shape.

Both corpora hold the same words (generated from a fixed vocabulary of English-like words, seeded): one as a
single line with no newline, one as ordinary paragraphs. Each is read and tokenised into a fresh token cache by
``engine.data.token_cache.prepared_store`` with the bundled vocabulary, in a subprocess of its own; printed:
peak RSS (``ru_maxrss``) and seconds, and the one-line corpus's peak as a ratio to the ordinary one's (the
reference, measured in the same run; ~1.0 is the goal).

    python bench/long_line.py                 # 200 MB
    python bench/long_line.py --mb 50
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("the river bank money water bridge city people history music science language school family "
         "government number system program question world country company market state group").split()


def write_corpus(path: Path, megabytes: int, one_line: bool, seed: int = 0) -> None:
    """``megabytes`` of seeded words: one line without a newline, or paragraphs of ~60 words."""
    rng = random.Random(seed)
    target = megabytes << 20
    with path.open("w", encoding="utf-8") as handle:
        written = 0
        while written < target:
            words = [rng.choice(WORDS) for _ in range(60)]
            text = " ".join(words).capitalize() + ". "
            handle.write(text if one_line else text + "\n\n")
            written += len(text) + (0 if one_line else 2)


def measure(corpus: Path) -> dict[str, float]:
    """Read and tokenise ``corpus`` into a fresh cache in a subprocess; its peak RSS (MB) and seconds."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]);"
            "from engine.data.corpus_sources import resolve_corpus;"
            "from engine.data.token_cache import prepared_store;"
            "from engine.text.tokenizer import WordPieceTokenizer;"
            "t = time.perf_counter();"
            "store = prepared_store(resolve_corpus(sys.argv[2]), WordPieceTokenizer.from_file(sys.argv[1] + "
            "'/assets/default-model'), 125, cache=__import__('pathlib').Path(sys.argv[3]), num_proc=1);"
            "print(store.num_documents, store.num_tokens, time.perf_counter() - t)")
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryFile("w+") as out:
        child = subprocess.Popen([sys.executable, "-c", code, str(ROOT), str(corpus), cache], stdout=out, text=True)
        _, status, usage = os.wait4(child.pid, 0)          # this child's own peak, not every child's
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise SystemExit(f"the tokenising process failed ({child.returncode})")
        out.seek(0)
        documents, tokens, seconds = out.read().split()
    return {"documents": int(documents), "tokens": int(tokens), "seconds": round(float(seconds), 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="size of each corpus in MB (default 200)")
    args = parser.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, one_line in (("paragraphs", False), ("one line", True)):      # the reference first
            path = Path(folder) / f"{name.replace(' ', '-')}.txt"
            write_corpus(path, args.mb, one_line)
            started = time.perf_counter()
            results[name] = measure(path)
            print(f"{name:10s} {args.mb} MB: {results[name]['documents']:,} documents, {results[name]['tokens']:,} "
                  f"tokens, {results[name]['seconds']} s, peak RSS {results[name]['peak_rss_mb']:,} MB "
                  f"[{time.perf_counter() - started:.0f} s with writing]", flush=True)
            path.unlink()
    ratio = results["one line"]["peak_rss_mb"] / results["paragraphs"]["peak_rss_mb"]
    print(json.dumps(results))
    print(f"peak RSS one line / paragraphs: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
