#!/bin/sh
# MobileNetV2-small on Fashion-MNIST from the command line (issue 37): cohort's train_mnist and
# PyTorch (bench/torch_train_mnist.py, the torchvision twin of cohort_modules.mobilenet_v2_small,
# channels_last) with the same recipe, one after the other. Each epoch goes to
# bench/mobilenet.jsonl, one JSON object per epoch, tagged "run": "cohort" or "pytorch".
#
#   sh bench/mobilenet_accuracy.sh [EPOCHS] [TRAIN_MNIST]      # default 8, build/examples/train_mnist
#
# The recipe is issue 17's (README, "Training recipes"): SGD lr 0.1 with Nesterov momentum 0.9,
# weight decay 5e-4 except on BatchNorm parameters and biases, one epoch of linear warm-up from
# 0.1x then cosine to 0, label smoothing 0.1, random crop (2 pixels of padding) and horizontal
# flips, gradients clipped to norm 5; batch 128, 2 threads.
set -e
EPOCHS=${1:-8}
BIN=${2:-build/examples/train_mnist}
PY=${PYTHON:-.venv/bin/python}
OUT=bench/mobilenet.jsonl
echo "== cohort ($EPOCHS epochs)"
$BIN --model mobilenet --threads 2 --epochs "$EPOCHS" --seed 1 --log-interval 0 --optimizer sgd --lr 0.1 \
  --momentum 0.9 --nesterov --weight-decay 5e-4 --no-decay-on-norms \
  --lr-schedule "cosine,warmup=1,start_factor=0.1,t_max=$((EPOCHS - 1))" --label-smoothing 0.1 \
  --augment crop=2,flip --clip-grad-norm 5 --metrics "$OUT.cohort"
echo "== pytorch ($EPOCHS epochs)"
$PY bench/torch_train_mnist.py --model mobilenet --recipe --epochs "$EPOCHS" --lr 0.1 --threads 2 \
  --layout channels_last --seed 1 > "$OUT.pytorch"
tail -1 "$OUT.pytorch"
for run in cohort pytorch; do
  grep '^{' "$OUT.$run" | sed "s/^{/{\"run\": \"$run\", /" >> "$OUT"
  rm -f "$OUT.$run"
done
