"""Copy the browser tests' screenshots into ``assets/screenshots/`` for the README.

``python -m pytest tests/e2e`` saves full-page screenshots in ``test-artifacts/``; this script takes the ones
the README shows (the walk's ``walk-<tab>-<theme>.png`` and the fine-tune path's and browser tour's own),
cuts each to its first 1,900 px, scales it to 3/4 and saves it with a 256-colour palette (~100-170 KB).
Usage: ``python scripts/readme_screenshots.py [--artifacts test-artifacts] [--out assets/screenshots]``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
MAX_HEIGHT = 1900
SCALE = 0.75
WALK_TABS = ("tokenize", "embeddings", "attention", "neuron-view", "fill-mask", "qa", "training", "why")
OWN_NAMES = ("compare", "neighbours", "syntax", "finetune", "finetune-pos", "finetune-choice", "heads-classify", "heads-tag",
             "heads-choose", "phone-tabs-light", "phone-glossary-dark")


def readme_copies(artifacts: Path) -> dict[str, Path]:
    """README file name -> the screenshot it is made from, for every source present in ``artifacts``."""
    sources: dict[str, Path] = {}
    for tab in WALK_TABS:
        for theme, suffix in (("light", ""), ("dark", "-dark")):
            sources[f"{tab}{suffix}.png"] = artifacts / f"walk-{tab}-{theme}.png"
    for name in OWN_NAMES:
        sources[f"{name}.png"] = artifacts / f"{name}.png"
    return {name: path for name, path in sources.items() if path.is_file()}


def shrink(source: Path, target: Path) -> None:
    """``source`` cut to ``MAX_HEIGHT`` px, scaled by ``SCALE`` and saved as a 256-colour PNG at ``target``."""
    with Image.open(source) as image:
        image = image.convert("RGB")
        image = image.crop((0, 0, image.width, min(image.height, MAX_HEIGHT)))
        image = image.resize((round(image.width * SCALE), round(image.height * SCALE)), Image.Resampling.LANCZOS)
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)


def main() -> None:
    """Shrink every screenshot the README shows from the artifacts folder into the screenshots folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path, default=ROOT / "test-artifacts")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshots")
    args = parser.parse_args()
    copies = readme_copies(args.artifacts)
    for name, source in sorted(copies.items()):
        shrink(source, args.out / name)
        print(f"{name:<24} from {source.name} ({(args.out / name).stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
