#!/usr/bin/env bash
# Validates the CUDA path on a machine with NVIDIA GPUs, in one command, and writes one report.
#
#   scripts/gpu-check.sh [all|build|test|train|report]      # default: all, in that order
#
#   build   configures build-gpu/ (Release, CMAKE_CUDA_ARCHITECTURES=native) and builds
#           cohort_cuda_tests and train_on_device_cuda
#   test    runs cohort_cuda_tests on GPU 0 (every case: layers, losses, optimisers, mixed
#           precision, the trainer; with >= 2 GPUs and NCCL also ThreadedReplicas<N, Cuda>)
#   train   trains model A (seed 000) and model B (seed 001) for one epoch on GPU 0 in fp32, fp16
#           and bf16 with cohort (train_on_device_cuda) and with PyTorch (bench/torch_gpu_seed.py,
#           eager, and torch.compile for fp32), on the same data
#   report  writes $REPORT (default gpu-check/report.md): the machine, each stage's status and
#           time, the test summary, and a table of epoch time / samples per second / accuracy
#
# Device time is scarce, so the binaries can be built elsewhere (same CUDA major version, x86-64):
#   here:   cmake -S . -B build-sm90 -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build-sm90 \
#             --target cohort_cuda_tests train_on_device_cuda
#   there:  GPU_BUILD_DIR=build-sm90 scripts/gpu-check.sh prebuilt     # test, train, report
# The test binaries find the fixtures through COHORT_FIXTURE_DIR, which this script sets to this
# checkout's tests/reference/fixtures (GPU_FIXTURE_LINK=1 also links the configured path there).
# `scripts/gpu-pack.sh --prebuilt build-sm90` packs the binaries (xz) and the MPI libraries they
# link into .gpu-deps/, which this script unpacks.
# libnccl.so.2 is looked for beside PyTorch's NVIDIA wheels when the loader does not find it.
#
# GPU_TEST_LIMIT (default 580 s) and GPU_RUN_LIMIT (300 s per training run) bound the stages.
#
# Every stage has a time limit and records FAILED or TIMEOUT instead of stopping the script, so a
# hang on first contact still leaves a report. Exit status: 0 when everything passed, 1 when
# something failed, 77 when no GPU is visible (nothing to check).
#
# Machines without Debian's packages or a network (the `device` tool's): run scripts/gpu-pack.sh
# on the Debian machine first and carry .gpu-deps/ (xtensor, xtl, doctest, zlib headers and the
# Fashion-MNIST files); this script uses it when it is there. Each stage fits in 10 minutes on a
# 16-core machine, so the stages can be separate calls.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:-all}
dir=${GPU_CHECK_DIR:-gpu-check}
REPORT=${REPORT:-$dir/report.md}
mkdir -p "$dir"
status_file="$dir/status.txt"
log() { echo "gpu-check: $*" | tee -a "$dir/gpu-check.log"; }

# run <name> <seconds> <command...>: records "<name> PASSED|FAILED (exit N)|TIMEOUT <seconds> s".
run() {
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(date +%s)
  log "$name: $*"
  timeout --kill-after=20 "$limit" "$@" >"$dir/$name.log" 2>&1
  rc=$?
  local took=$(($(date +%s) - t0)) what
  if [ $rc -eq 0 ]; then what=PASSED; elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then what="TIMEOUT after ${limit} s"; else what="FAILED (exit $rc)"; fi
  sed -i "/^$name /d" "$status_file" 2>/dev/null
  echo "$name $what ${took} s" >>"$status_file"
  log "$name: $what in ${took} s"
  tail -n 5 "$dir/$name.log"
  return $rc
}

data_dir=/usr/share/datasets/fashion-mnist
[ -d .gpu-deps/fashion-mnist ] && data_dir=$PWD/.gpu-deps/fashion-mnist
python=${PYTHON:-python3}
bdir=${GPU_BUILD_DIR:-build-gpu}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

machine() {
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
    echo "nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -n 2 | head -n 1)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
    echo "torch: $($python -c 'import torch; print(torch.__version__, torch.cuda.is_available())' 2>/dev/null)"
  } >"$dir/machine.txt"
  cat "$dir/machine.txt"
}

do_build() {
  local args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=native)
  [ -d .gpu-deps/prefix ] && args+=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps/prefix")
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  run configure 300 cmake -S . -B build-gpu "${args[@]}" &&
    run build 580 cmake --build build-gpu -j "$(nproc)" --target cohort_cuda_tests train_on_device_cuda
}

# The loader's path for programs built elsewhere: NCCL from PyTorch's wheels if nothing else has it.
find_libraries() {
  if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2'; then
    local nccl
    nccl=$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -n 1)
    [ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname "$nccl")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  [ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64"
  log "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  # Carried by gpu-pack.sh --prebuilt: the build tree's binaries and the MPI libraries they link.
  if [ -f .gpu-deps/prebuilt.tar.xz ] && [ ! -x "$bdir/tests/cohort_cuda_tests" ]; then
    tar -xJf .gpu-deps/prebuilt.tar.xz && log "unpacked .gpu-deps/prebuilt.tar.xz"
  fi
  [ -d .gpu-deps/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu-deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ "${GPU_FIXTURE_LINK:-0}" = 1 ] && [ -f "$bdir/CMakeCache.txt" ]; then
    local src
    src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$bdir/CMakeCache.txt")
    if [ -n "$src" ] && [ ! -e "$src/tests/reference/fixtures" ]; then
      mkdir -p "$src/tests/reference" && ln -s "$PWD/tests/reference/fixtures" "$src/tests/reference/fixtures" &&
        log "fixtures: $src/tests/reference/fixtures -> $PWD/tests/reference/fixtures"
    fi
  fi
  # The test binaries read the fixtures' path from the environment first (tests/support/fixture_dir.hpp).
  export COHORT_FIXTURE_DIR="$PWD/tests/reference/fixtures"
  ldd "$bdir/tests/cohort_cuda_tests" 2>&1 | grep -E 'not found|nccl|cublas|cudart' | sed 's/^/gpu-check: ldd: /'
}

do_test() {
  # One GPU for the single-device cases; the replica/NCCL cases pick up every visible GPU.
  run cuda_tests "${GPU_TEST_LIMIT:-580}" "$bdir/tests/cohort_cuda_tests" --no-intro --no-version --duration=true \
    --test-case-exclude='*ProcessGroupDDP*'
  grep -E '^\[doctest\] (test cases|assertions)' "$dir/cuda_tests.log" >"$dir/cuda_tests.summary" || true
  # doctest counts a case that printed COHORT_SKIP (too few GPUs) as passed: say so.
  grep -o 'COHORT_SKIP: .*' "$dir/cuda_tests.log" | sort | uniq -c |
    sed 's/^ *\([0-9]*\) COHORT_SKIP: /counted as passed, but skipped their checks: \1 case(s), /' >>"$dir/cuda_tests.summary" || true
  # Apart, since it starts MPI (a singleton world of 1), which a GPU machine may lack.
  run cuda_tests_ddp 120 "$bdir/tests/cohort_cuda_tests" --no-intro --no-version --duration=true \
    --test-case='*ProcessGroupDDP*'
  grep -E '^\[doctest\] (test cases|assertions)' "$dir/cuda_tests_ddp.log" | sed 's/^/ProcessGroupDDP: /' >>"$dir/cuda_tests.summary" || true
  if [ "$gpus" -lt 2 ]; then
    log "one GPU: the ThreadedReplicas<N, Cuda> / NCCL cases ran on 1 device only (they need >= 2 for a real exchange)"
  fi
}

do_train() {
  : >"$dir/cohort.jsonl"
  : >"$dir/torch.jsonl"
  for model in A B; do
    for precision in fp32 fp16 bf16; do
      run "cohort_${model}_${precision}" "${GPU_RUN_LIMIT:-300}" "$bdir/examples/train_on_device_cuda" --model "$model" \
        --precision "$precision" --epochs 1 --data-dir "$data_dir" --metrics "$dir/cohort.jsonl"
      run "torch_${model}_${precision}" "${GPU_RUN_LIMIT:-300}" sh -c "$python bench/torch_gpu_seed.py --model $model --precision \
        $precision --data-dir $data_dir >> $dir/torch.jsonl"
    done
    run "torch_${model}_fp32_compile" "${GPU_RUN_LIMIT:-300}" sh -c "$python bench/torch_gpu_seed.py --model $model --precision fp32 \
      --compile --data-dir $data_dir >> $dir/torch.jsonl"
  done
}

do_report() {
  $python - "$dir" "$REPORT" <<'PY'
import json, os, sys
d, report = sys.argv[1], sys.argv[2]
def lines(name):
    p = os.path.join(d, name)
    return [l.rstrip("\n") for l in open(p)] if os.path.exists(p) else []
def records(name):
    out = []
    for l in lines(name):
        try:
            out.append(json.loads(l))
        except ValueError:
            pass
    return out
r = ["# GPU check", "", "Written by scripts/gpu-check.sh.", "", "## Machine", ""]
r += ["    " + l for l in lines("machine.txt")]
r += ["", "## Stages", "", "| stage | result | time |", "|---|---|---|"]
for l in lines("status.txt"):
    name, rest = l.split(" ", 1)
    result, took = rest.rsplit(" ", 2)[0], " ".join(rest.rsplit(" ", 2)[1:])
    r.append(f"| {name} | {result} | {took} |")
r += ["", "## cohort_cuda_tests", ""] + ["    " + l for l in lines("cuda_tests.summary") or ["(not run)"]]
fails = [l for l in lines("cuda_tests.log") + lines("cuda_tests_ddp.log") if "ERROR" in l or "FATAL" in l][:30]
if fails:
    r += ["", "First failures:", ""] + ["    " + l for l in fails]
r += ["", "## One epoch of Fashion-MNIST on GPU 0", "",
      "| model | precision | framework | epoch s | samples/s | test accuracy (%) |", "|---|---|---|---|---|---|"]
for rec in records("cohort.jsonl"):
    r.append(f"| {rec.get('model_size')} | {rec.get('precision')} | cohort | {rec.get('epoch time')} | "
             f"{rec.get('samples_per_s')} | {rec.get('test_accuracy')} |")
for rec in records("torch.jsonl"):
    fw = "torch.compile" if rec.get("compile") else "PyTorch eager"
    r.append(f"| {rec['model']} | {rec['precision']} | {fw} | {rec['epoch time']:.3f} | {rec['samples_per_s']:.0f} | "
             f"{rec['test_accuracy']:.2f} |")
open(report, "w").write("\n".join(r) + "\n")
print("\n".join(r))
PY
}

machine
if [ "$gpus" -eq 0 ]; then
  log "no NVIDIA GPU visible (nvidia-smi -L lists none): nothing to check"
  echo "machine NO-GPU 0 s" >"$status_file"
  do_report >/dev/null
  exit 77
fi
case $stage in
build) do_build ;;
test) find_libraries; do_test ;;
train) find_libraries; do_train ;;
report) do_report ;;
prebuilt)
  find_libraries
  do_test
  do_train
  do_report
  ;;
all)
  do_build && do_test
  do_train
  do_report
  ;;
*)
  echo "usage: scripts/gpu-check.sh [all|build|test|train|report|prebuilt]" >&2
  exit 2
  ;;
esac
if grep -qE 'FAILED|TIMEOUT' "$status_file" 2>/dev/null; then exit 1; fi
exit 0
