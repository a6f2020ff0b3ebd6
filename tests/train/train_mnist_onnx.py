#!/usr/bin/env python3
"""train.export_onnx: train_mnist trains model C for a few steps and exports it with
--export-onnx; ONNX Runtime then classifies the whole Fashion-MNIST test set with the exported
file, normalised as train_mnist's start-up line says, and must reach the accuracy train_mnist
printed (the same 10,000 decisions, up to 3 images whose two best scores are within float rounding).

    train_mnist_onnx.py TRAIN_MNIST WORK_DIR [DATA_DIR]

Exits 77 (skipped) without onnxruntime or the dataset.
"""
import gzip
import os
import re
import subprocess
import sys

exe, work = sys.argv[1], sys.argv[2]
data = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/datasets/fashion-mnist"
try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"COHORT_SKIP: {e.name} is not installed (scripts/install-python.sh)")
    sys.exit(77)
images_path = os.path.join(data, "t10k-images-idx3-ubyte.gz")
if not os.path.exists(images_path):
    print(f"COHORT_SKIP: no Fashion-MNIST at {data} (apt-get install dataset-fashion-mnist)")
    sys.exit(77)

os.makedirs(work, exist_ok=True)
model = os.path.join(work, "model_c.onnx")
if os.path.exists(model):
    os.remove(model)
r = subprocess.run([exe, "--model", "C", "--epochs", "1", "--max-steps", "30", "--threads", "2", "--data-dir", data,
                    "--export-onnx", model], capture_output=True, text=True)
print(r.stdout)
assert r.returncode == 0, r.stderr
assert os.path.exists(model), "train_mnist --export-onnx wrote nothing"
mean, std = map(float, re.search(r"\(mean ([0-9.]+), std ([0-9.]+)\)", r.stdout).groups())
printed = float(re.search(r"Test accuracy: ([0-9.]+)%", r.stdout).group(1))
assert f"ONNX model: {model}" in r.stdout, "the summary does not say where the ONNX model went"

with gzip.open(images_path) as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28).astype(np.float32)
with gzip.open(os.path.join(data, "t10k-labels-idx1-ubyte.gz")) as f:
    y = np.frombuffer(f.read(), np.uint8, offset=8)
# train_mnist's normalisation: the training set's mean and population std of pixel / 255 (exact
# sums, as Normalization::of), then (pixel / 255 - mean) / std in float.
with gzip.open(os.path.join(data, "train-images-idx3-ubyte.gz")) as f:
    train = np.frombuffer(f.read(), np.uint8, offset=16).astype(np.float64) / 255
exact_mean, exact_std = np.float32(train.mean()), np.float32(train.std())
assert abs(exact_mean - mean) < 1e-4 and abs(exact_std - std) < 1e-4, (exact_mean, mean, exact_std, std)
x = ((x / np.float32(255)) - exact_mean) / exact_std
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
scores = np.concatenate([session.run(None, {"input": x[i:i + 1000]})[0] for i in range(0, len(x), 1000)])
accuracy = 100.0 * float((scores.argmax(1) == y).mean())
print(f"train_mnist printed {printed:.2f}%, ONNX Runtime on the exported file {accuracy:.2f}%")
# Up to 3 images of 10,000 (0.03%): near-ties that another summation order may break either way.
assert abs(accuracy - printed) <= 0.031, (accuracy, printed)
print("train.export_onnx: passed")
