#!/bin/sh
# The ResNet recipe of issue 17 against the same ResNet-20 without it, on Fashion-MNIST, one after
# the other on a quiet machine (each run's epochs go to bench/recipe.jsonl, one JSON object per
# epoch, tagged with "run": "baseline" or "recipe").
#
#   sh bench/resnet_recipe.sh [EPOCHS] [TRAIN_MNIST]      # default 10, build/examples/train_mnist
#
# Baseline: SGD lr 0.1 momentum 0.9, constant rate, no weight decay, no smoothing, no augmentation.
# Recipe: the same SGD with Nesterov momentum, weight decay 5e-4 except on BatchNorm parameters
# and biases, one epoch of linear warm-up from 0.1x then cosine to 0, label smoothing 0.1, random
# crop with 2 pixels of zero padding and horizontal flips, gradients clipped to norm 5.
set -e
EPOCHS=${1:-10}
BIN=${2:-build/examples/train_mnist}
OUT=bench/recipe.jsonl
COMMON="--model resnet --threads 2 --epochs $EPOCHS --seed 1 --log-interval 0 --optimizer sgd --lr 0.1 --momentum 0.9"
echo "== baseline ($EPOCHS epochs)"
$BIN $COMMON --metrics "$OUT.baseline"
echo "== recipe ($EPOCHS epochs)"
$BIN $COMMON --nesterov --weight-decay 5e-4 --no-decay-on-norms \
  --lr-schedule "cosine,warmup=1,start_factor=0.1,t_max=$((EPOCHS - 1))" --label-smoothing 0.1 \
  --augment crop=2,flip --clip-grad-norm 5 --metrics "$OUT.recipe"
for run in baseline recipe; do
  sed "s/^{/{\"run\": \"$run\", /" "$OUT.$run" >> "$OUT"
  rm -f "$OUT.$run"
done
