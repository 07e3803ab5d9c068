"""What the model knows about syntax, trained against untrained: the bundled default model and a freshly
initialised model of the same shape (same tokenizer, BERT's initialisation, seed 0) on the bundled UD sample.

1. **Heads** (Clark et al. 2019): per relation, the best head (over both directions) and the best fixed-offset
   baseline; how many relations each model's best head beats the baseline for.
2. **Layer probe** (Hewitt & Liang 2019): UPOS accuracy, control-task accuracy and selectivity by layer, with
   the majority (lookup-table) baseline; the attention-only parser's held-out UAS beside the best fixed offset.
3. **Timings** against the goals, on ``--threads`` cores: the heads view for ``--heads-sentences`` sentences
   (one forward + the scores, first call: the model already loaded), the layer probes on every sentence (the
   fits; the forward they share with the heads is timed apart), one over-training point (load + forward + heads +
   probe) on every sentence and on the tab's default of 100. Each is printed in wall and CPU seconds (a busy machine stretches the first, not the second) with its
   ratio to the goal and to a reference measured in the same run: a plain forward over the heads view's sentences
   with no attention kept (``model.bert`` without ``output_attentions``).

Usage: python bench/syntax_probe.py [--threads 2] [--heads-sentences 200] [--model default]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR, load_directory  # noqa: E402
from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from engine.probes.syntax.conllu import DependencySentence, read_sample  # noqa: E402
from engine.probes.syntax.features import encode_words, sentence_features  # noqa: E402
from engine.probes.syntax.heads import head_scores  # noqa: E402
from engine.probes.syntax.layer_probe import layer_probe  # noqa: E402
from engine.probes.syntax.over_training import syntax_point  # noqa: E402
from engine.probes.syntax.parser import attention_parser  # noqa: E402

GOALS = {"heads view": 10.0, "layer probes": 20.0, "over-training point": 15.0}   # seconds, 2 cores
TAB_OVER_TRAINING = 100        # the Syntax tab's over-training default (explorer.syntax.tab.OVER_TRAINING_SENTENCES)


def fresh_model(loaded: LoadedModel, seed: int = 0) -> LoadedModel:
    """A model of ``loaded``'s shape with BERT's initialisation (untrained), the same tokenizer."""
    torch.manual_seed(seed)
    model = BertWithHeads(loaded.config, heads=("mlm",)).eval()
    return LoadedModel(model, loaded.tokenizer, loaded.config, f"untrained (seed {seed})")


def plain_forward_seconds(loaded: LoadedModel, sentences: list[DependencySentence]) -> float:
    """The reference: the same sentences through the encoder one batch of 32 at a time, nothing kept."""
    encodings = sorted(encode_words(loaded, sentences), key=lambda e: len(e.ids))
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(encodings), 32):
            batch = encodings[i:i + 32]
            width = max(len(e.ids) for e in batch)
            ids = torch.zeros((len(batch), width), dtype=torch.long)               # (B, S)
            mask = torch.zeros_like(ids)
            for row, e in enumerate(batch):
                ids[row, :len(e.ids)], mask[row, :len(e.ids)] = torch.tensor(e.ids), 1
            loaded.model.bert(ids, attention_mask=mask)
    return time.perf_counter() - start


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``, its wall-clock seconds and the CPU seconds this process spent on it (all threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def measure(loaded: LoadedModel, sentences: list[DependencySentence], heads_sentences: int) -> dict[str, Any]:
    """The measures and their timings (wall, CPU) for one model."""
    heads_few, *heads_view = timed(lambda: head_scores(sentence_features(loaded, sentences[:heads_sentences])))
    features, *forward = timed(lambda: sentence_features(loaded, sentences))
    probe, *fits = timed(lambda: layer_probe(features))
    parser, *parsing = timed(lambda: attention_parser(features))
    return {"heads": head_scores(features), "heads_few": heads_few, "probe": probe, "heads_view": heads_view,
            "parser": parser, "parser_time": parsing,
            "forward": forward, "probe_fits": fits,
            "reference_s": plain_forward_seconds(loaded, sentences[:heads_sentences])}


def print_heads(name: str, found: dict[str, Any]) -> None:
    heads = found["heads"]
    print(f"\n## {name}: best head per relation (all {heads.num_sentences} sentences, {heads.num_words} words)")
    print("| relation | arcs | best head (layer-head) | direction | accuracy | baseline (offset) | margin |")
    print("|---|---|---|---|---|---|---|")
    for row in heads.best_heads():
        print(f"| {row['relation']} | {row['count']} | {row['layer']}-{row['head']} | {row['direction']} | "
              f"{row['accuracy']:.1%} | {row['baseline']:.1%} ({row['offset']:+d}) | {row['margin'] * 100:+.1f} pt |")
    beaten = heads.beaten()
    print(f"beats the baseline for {len(beaten)} of {len(heads.relations)} relations: {', '.join(beaten)}")


def print_probe(name: str, found: dict[str, Any]) -> None:
    probe = found["probe"]
    print(f"\n## {name}: UPOS probe by layer ({probe.train_words} training words, {probe.test_words} held out; "
          f"majority baseline {probe.majority:.1%})")
    print("| layer | accuracy | control | selectivity |")
    print("|---|---|---|---|")
    for row in probe.records():
        print(f"| {row['layer']} | {row['accuracy']:.1%} | {row['control_accuracy']:.1%} | "
              f"{row['selectivity'] * 100:.1f} pt |")
    print(f"selectivity peaks at layer {probe.best_layer}")
    parser = found["parser"]
    print(f"attention-only parser: UAS {parser.uas:.1%} on {parser.test_words} held-out words; fixed offset "
          f"{parser.baseline_offset:+d}: {parser.baseline_uas:.1%} ({found['parser_time'][0]:.1f} s)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--heads-sentences", type=int, default=200)
    parser.add_argument("--model", default=str(DEFAULT_MODEL_DIR), help="a model folder (default: the bundled one)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sentences = read_sample()
    start = time.perf_counter()
    trained = load_directory(args.model)
    load_s = time.perf_counter() - start
    models = {"default model": trained, "untrained (same shape)": fresh_model(trained)}
    results = {name: measure(model, sentences, args.heads_sentences) for name, model in models.items()}
    for name, found in results.items():
        print_heads(name, found)
        print_probe(name, found)
    _, *point = timed(lambda: syntax_point(load_directory(args.model), sentences))
    _, *point_tab = timed(lambda: syntax_point(load_directory(args.model), sentences[:TAB_OVER_TRAINING]))
    found = results["default model"]
    reference = found["reference_s"]
    print(f"\n## Timings on {args.threads} thread(s) (the default model; loading it took {load_s:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f})")
    print("| what | wall s | CPU s | goal s | wall / goal | wall / plain forward of the same sentences |")
    print("|---|---|---|---|---|---|")
    timings = {"heads view": found["heads_view"], "layer probes": found["probe_fits"],
               "over-training point": point, f"over-training point, {TAB_OVER_TRAINING} sentences": point_tab}
    for what, (wall, cpu) in timings.items():
        goal = GOALS[what.split(",")[0]]
        print(f"| {what} | {wall:.2f} | {cpu:.2f} | {goal:.0f} | {wall / goal:.2f} | {wall / reference:.1f} |")
    print(f"(forward over all {len(sentences)} sentences with maps and vectors kept: {found['forward'][0]:.2f} s; "
          f"the plain forward of {args.heads_sentences}: {reference:.2f} s)")
    return {"results": results, "timings": timings}


if __name__ == "__main__":
    main()
