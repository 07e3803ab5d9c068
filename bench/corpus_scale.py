"""Pretraining on corpora of growing size: peak memory, tokenising speed, time to the first step.

For each size (default 10, 100 and 1000 MB of text) the bench builds a folder of ``.jsonl`` files
(one Wikipedia article per line) from the WikiExtractor dump in ``../shared/data`` (the articles
repeated in a new shuffled order per pass when the size needs more text than the dump holds,
~150 MB), then runs ``python -m engine.pretrain --corpus <folder> --preset tiny --tokenizer
assets/default-model --steps N`` twice in a subprocess:

* **cold**: an empty token cache, so the corpus is read, split and tokenised first;
* **cached**: the same command again, which opens the memory-mapped store from the cache.

Printed per run: peak RSS of the process tree's largest process (``wait4``'s ``ru_maxrss``),
tokenising MB/s (corpus bytes / the time between the "tokenising" and the "planning" messages),
seconds to the first step (process start to the first ``step 1/`` line) and steps/s after the
first step (the ``step`` lines' arrival times). The reference measured in the same run is the
10 MB corpus: each later size's RSS and steps/s are printed as ratios to it (flat is the goal).

``--reference-tree DIR`` also runs the same 10 MB command (as one file, as it accepted) in another
checkout, e.g. ``git worktree add /tmp/before <commit>``, for a before/after line.

    python bench/corpus_scale.py                    # 10, 100, 1000 MB
    python bench/corpus_scale.py --sizes 10,100 --steps 20
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIKI = ROOT.parent / "shared" / "data" / "enwiki-2015-wikiextractor"
FILE_BYTES = 64 << 20
_DOC = re.compile(r'<doc [^>]*>\n[^\n]*\n(.*?)</doc>', re.S)


def wiki_articles(folder: Path) -> list[str]:
    """The articles' text (the title line dropped; one paragraph per line kept)."""
    articles = []
    for path in sorted(folder.rglob("wiki_*")):
        articles.extend(m.group(1).strip() for m in _DOC.finditer(path.read_text(encoding="utf-8")))
    return [a for a in articles if a]


def build_corpus(articles: list[str], megabytes: int, folder: Path) -> int:
    """A folder of .jsonl files holding about ``megabytes`` MB; returns its size in bytes."""
    if folder.exists():
        return sum(p.stat().st_size for p in folder.glob("*.jsonl"))
    folder.mkdir(parents=True)
    target, written, index, rng = megabytes * 10**6, 0, 0, random.Random(0)
    handle, in_file = None, 0
    while written < target:
        order = list(range(len(articles)))
        rng.shuffle(order)
        for i in order:
            if handle is None or in_file >= FILE_BYTES:
                if handle is not None:
                    handle.close()
                handle, in_file, index = open(folder / f"part-{index:04d}.jsonl", "w", encoding="utf-8"), 0, index + 1
            line = json.dumps({"text": articles[i]}) + "\n"
            handle.write(line)
            size = len(line.encode())
            written, in_file = written + size, in_file + size
            if written >= target:
                break
    handle.close()
    return written


def run(command: list[str], cwd: Path, cache: Path, run_dir: Path) -> dict[str, float]:
    """Run one pretraining command; times of its stage messages, peak RSS and steps/s."""
    env = {**os.environ, "BERT_ENGINE_CACHE": str(cache), "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    process = subprocess.Popen([*command, "--run-dir", str(run_dir)], cwd=cwd, env=env, stderr=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, text=True)
    marks: dict[str, float] = {}
    steps: list[float] = []
    for line in process.stderr:
        now = time.perf_counter() - start
        if line.startswith("tokenising") or line.startswith("building pretraining instances"):
            marks.setdefault("tokenising", now)
        elif line.startswith("planning") or line.startswith("building the model"):
            marks.setdefault("planned", now)
        elif re.match(r"step \d+/", line):
            steps.append(now)
        elif "error" in line.lower():
            print("   ", line.rstrip(), file=sys.stderr)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0 or not steps:
        raise RuntimeError(f"{' '.join(command)} failed (status {status})")
    return {"rss_gb": usage.ru_maxrss / 2**20, "tokenise_s": marks.get("planned", 0) - marks.get("tokenising", 0),
            "first_step_s": steps[0], "steps_per_s": (len(steps) - 1) / (steps[-1] - steps[0]) if len(steps) > 1 else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="corpus sizes in MB (default 10,100,1000)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "corpus_scale"))
    parser.add_argument("--reference-tree", help="another checkout to run the 10 MB case in (one file)")
    args = parser.parse_args()
    work = Path(args.workdir)
    articles = wiki_articles(WIKI)
    print(f"{len(articles):,} Wikipedia articles; {os.cpu_count()} CPU cores; {args.steps} steps per run")
    command = [sys.executable, "-m", "engine.pretrain", "--preset", "tiny", "--tokenizer", str(ROOT / "assets" /
               "default-model"), "--steps", str(args.steps), "--no-progress", "--eval-every", "100000",
               "--checkpoint-every", "100000", "--checkpoint-every-s", "100000"]
    print(f"{'corpus':>8} {'run':>7} {'peak RSS':>9} {'tokenise':>10} {'1st step':>9} {'steps/s':>8}"
          f" {'RSS/ref':>8} {'steps/s/ref':>12}")
    reference = None
    for megabytes in [int(s) for s in args.sizes.split(",")]:
        folder = work / f"{megabytes}MB"
        size = build_corpus(articles, megabytes, folder)
        cache = work / f"cache-{megabytes}"
        shutil.rmtree(cache, ignore_errors=True)
        for kind in ("cold", "cached"):
            result = run([*command, "--corpus", str(folder)], ROOT, cache, work / f"run-{megabytes}-{kind}")
            shutil.rmtree(work / f"run-{megabytes}-{kind}", ignore_errors=True)
            reference = reference or result
            speed = f"{size / 1e6 / result['tokenise_s']:6.1f} MB/s" if kind == "cold" else "    cached"
            print(f"{size / 1e6:6.0f}MB {kind:>7} {result['rss_gb']:7.2f}GB {speed:>10} {result['first_step_s']:8.1f}s "
                  f"{result['steps_per_s']:8.2f} {result['rss_gb'] / reference['rss_gb']:8.2f} "
                  f"{result['steps_per_s'] / reference['steps_per_s']:12.2f}", flush=True)
        shutil.rmtree(cache, ignore_errors=True)
    if args.reference_tree:
        one_file = work / "10MB-one-file.jsonl"
        if not one_file.exists():
            with open(one_file, "wb") as out:
                for part in sorted((work / "10MB").glob("*.jsonl")):
                    out.write(part.read_bytes())
        result = run([*command, "--corpus", str(one_file)], Path(args.reference_tree), work / "cache-ref",
                     work / "run-ref")
        print(f"reference tree, 10 MB: peak RSS {result['rss_gb']:.2f} GB, first step {result['first_step_s']:.1f} s, "
              f"{result['steps_per_s']:.2f} steps/s")


if __name__ == "__main__":
    main()
