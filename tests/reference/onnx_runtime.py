#!/usr/bin/env python3
"""cohort's ONNX export (cohort/io/onnx.hpp) computes in onnxruntime what cohort computes.

    python3 tests/reference/onnx_runtime.py HELPER WORKDIR

For models A, B, C, D, ResNet-20 and "mixed" (the layer kinds those leave out: GELU, SiLU,
LeakyReLU, AvgPool2d, BatchNorm1d, a Bottleneck block, a block inside a branch) and "efficient"
(depthwise Conv with group, ReLU6 as Clip, HardSwish, HardSigmoid, Tanh, Sigmoid) and "dense"
(Concat blocks, Upsample as Resize: nearest, linear half-pixel and align_corners, GroupNorm as
Reshape + InstanceNormalization, ConvTranspose), HELPER
(tests/tools/onnx_export.cpp) trains one SGD step, exports model.onnx and cohort's eval-mode
output on a batch. The file must pass onnx.checker (when onnx is installed) and onnxruntime's
CPU provider must reproduce the output within 1e-5 * max(1, max|output|), for batches of 5 and
1 (the batch dimension is symbolic). Exit 77 (ctest: skipped) without onnxruntime.
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

try:
    import onnx
except ImportError:
    onnx = None

MODELS = ["A", "B", "C", "D", "resnet20", "mixed", "efficient", "dense"]
BATCHES = [5, 1]


def check_model(helper, work, name):
    """Returns the worst |difference| / max(1, max|output|) over the batches; raises on failure."""
    out = os.path.join(work, name)
    path = os.path.join(out, "model.onnx")
    exported = []
    for batch in BATCHES:  # the export must not depend on the batch: one file serves both
        subprocess.run([helper, name, out, str(batch)], check=True)
        with open(path, "rb") as f:
            exported.append(f.read())
    if any(e != exported[0] for e in exported):
        raise AssertionError(f"{name}: two exports of the same network differ")
    if onnx is not None:
        m = onnx.load(path)
        onnx.checker.check_model(m, full_check=True)
        assert m.opset_import[0].version == 17, m.opset_import
        assert [i.name for i in m.graph.input] == ["input"], [i.name for i in m.graph.input]
        assert [o.name for o in m.graph.output] == ["output"], [o.name for o in m.graph.output]
        assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    worst = 0.0
    for batch in BATCHES:
        io = load_file(os.path.join(out, f"io_{batch}.safetensors"))
        (y,) = sess.run(None, {"input": io["x"]})
        ref = io["y"]
        if y.shape != ref.shape:
            raise AssertionError(f"{name}: onnxruntime gave shape {y.shape}, cohort {ref.shape}")
        diff = float(np.abs(y.astype(np.float64) - ref).max())
        top = float(np.abs(ref).max())
        print(f"{name}, batch {batch}: max |onnxruntime - cohort| = {diff:.3g} (max |cohort| {top:.3g})")
        worst = max(worst, diff / max(1.0, top))
    return worst


def main():
    helper, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__ if onnx else 'not installed (checker skipped)'}")
    failed = []
    for name in MODELS:
        try:
            if check_model(helper, work, name) > 1e-5:
                failed.append(name)
        except Exception as e:  # report every model, then fail
            print(f"{name}: {type(e).__name__}: {e}")
            failed.append(name)
    if failed:
        print("FAILED:", ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
