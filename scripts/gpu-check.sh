#!/usr/bin/env bash
# The GPU check: everything cohort wants to know from a GPU machine, in one command that fits one
# 10-minute call of the `device` tool and brings back a report even when it is cut short.
#
#   here:   scripts/gpu-pack.sh --prebuilt build-sm90     # build, pack (.gpu-deps/, <= 64 MiB)
#   there:  scripts/gpu-check.sh all                       # carry .gpu-deps; the report lands in $OUT
#
# Modes: all (below), build (configure and build build-gpu/ there, when nothing was packed),
# report (rewrite the report from what GPU_CHECK_DIR holds).
#
# `all` runs its stages in priority order under one deadline, GPU_DEADLINE_S seconds (default
# 500) from its start. Each stage's own limit is clipped to the time left (minus
# GPU_REPORT_RESERVE_S, default 10, for the last report); a stage with less than
# GPU_MIN_STAGE_S (5) left is SKIPPED. A stage that fails or times out is recorded and the next
# one runs. After every stage the report (report.md + report.jsonl, scripts/gpu_report.py) and
# an archive of the stages' logs (gpu-check-logs.tgz) are rewritten into GPU_CHECK_DIR (default
# gpu-check/) and into $OUT when set (the device tool's folder that comes back: three files of
# its eight), so a killed run still returns all it finished.
#
#   probe             the machine, driver, CUDA, ncu, PyTorch versions; unpacks the prebuilt binaries
#   cuda_tests        cohort_cuda_tests on GPU 0 (every case but ProcessGroupDDP's), then
#   cuda_tests_ddp    its ProcessGroupDDP cases (a singleton MPI world)
#   correctness_fp32  ResNet-20, 50 steps unshuffled, each step's loss against the CPU backend's
#   correctness_bf16  (train_mnist, run by gpu-pack.sh), within max(1e-4 fp32 | 1e-2 bf16, 3 x the
#                     drift of the device kernels on the CPU from the same reference up to that step)
#   cohort_<model>    train_on_device_cuda --windows 3: fp32, tf32, fp16, bf16 of resnet, A, B, C, D
#   torch_eager       bench/torch_gpu_seed.py: the five models in nchw-fp32, nchw-tf32, cl-tf32,
#                     cl-bf16 and cl-fp16 (cl: channels_last; bf16/fp16: autocast)
#   profile           ncu over two ResNet-20 steps: launches per step, kernels by time, host waits
#   nccl_two_ranks    cohort_nccl_two_ranks: two ranks on GPU 0 with distinct NCCL_HOSTID; the
#                     all-reduce (fp32, bf16 and fp16 buckets) bit for bit, and the watchdog
#   torch_compile     torch.compile(mode="reduce-overhead") of the five models, cl-bf16 and nchw-tf32
#                     (last: each compilation costs tens of seconds)
#
# Without a GPU (nvidia-smi lists none, or GPU_CHECK_FORCE_NO_GPU=1) `all` records every GPU
# stage as SKIPPED, writes the report and exits 77; GPU_CHECK_SELFTEST=1 adds a stage that hangs,
# to show it cut at its clipped limit (CI's test scripts.gpu_check_without_gpu). Exit status: 0
# when every stage passed, 1 otherwise, 77 without a GPU.
#
# Inputs, all optional: GPU_BUILD_DIR (default: the one gpu-pack.sh packed, else build-gpu),
# PYTHON (python3), .gpu-deps/ (gpu-pack.sh: headers, Fashion-MNIST, prebuilt binaries, the MPI
# libraries they link, the CPU reference losses).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
dir=${GPU_CHECK_DIR:-gpu-check}
out=${OUT:-}
deadline_s=${GPU_DEADLINE_S:-500}
reserve_s=${GPU_REPORT_RESERVE_S:-10}
min_stage_s=${GPU_MIN_STAGE_S:-5}
python=${PYTHON:-python3}
t_start=$(date +%s)
mkdir -p "$dir"
log() { echo "gpu-check: $*" | tee -a "$dir/gpu-check.log" >&2; }

data_dir=/usr/share/datasets/fashion-mnist
[ -d .gpu-deps/fashion-mnist ] && data_dir=$PWD/.gpu-deps/fashion-mnist
bdir=${GPU_BUILD_DIR:-$(cat .gpu-deps/build_dir 2>/dev/null || echo build-gpu)}
gpus=0
if [ "${GPU_CHECK_FORCE_NO_GPU:-0}" != 1 ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi

elapsed() { echo $(($(date +%s) - t_start)); }
time_left() { echo $((deadline_s - $(elapsed) - reserve_s)); }

# record <stage> <result> <seconds> <limit> [note]: one JSON line in stages.jsonl.
record() {
  local note=${5:-}
  note=${note//\\/\\\\}
  note=${note//\"/\\\"}
  printf '{"stage": "%s", "result": "%s", "seconds": %s, "limit_s": %s, "note": "%s"}\n' "$1" "$2" "$3" "$4" "$note" \
    >>"$dir/stages.jsonl"
}

# The report, and the small files behind it, into $dir and $OUT (atomically: a kill mid-write
# leaves the previous report).
report() {
  printf '{"deadline_s": %s, "elapsed_s": %s}\n' "$deadline_s" "$(elapsed)" >"$dir/deadline.json"
  $python scripts/gpu_report.py write "$dir" ${out:+"$out"} >/dev/null 2>>"$dir/gpu-check.log" ||
    log "the report could not be written (scripts/gpu_report.py failed)"
  # The device tool brings back at most 8 files from $OUT: the report's two and one archive of
  # the stages' logs and records (each file under 2 MB).
  if [ -n "$out" ]; then
    mkdir -p "$out"
    (cd "$dir" && find . -maxdepth 1 -type f -size -2M \( -name '*.log' -o -name '*.json' -o -name '*.jsonl' \
      -o -name '*.txt' -o -name '*.summary' -o -name '*.csv' \) -print0 | tar --null -T - -czf "$out/gpu-check-logs.tgz.tmp") &&
      mv -f "$out/gpu-check-logs.tgz.tmp" "$out/gpu-check-logs.tgz"
  fi
}

# stage <name> <limit> <command...>: runs the command under min(limit, time left), records
# PASSED, FAILED (exit N), TIMEOUT or SKIPPED, rewrites the report. Returns the command's status.
stage() {
  local name=$1 want=$2
  shift 2
  local left limit note="" t0 rc took result
  left=$(time_left)
  if [ "$left" -lt "$min_stage_s" ]; then
    record "$name" SKIPPED 0 0 "deadline: ${left} s left of ${deadline_s} s"
    log "$name: SKIPPED (deadline: ${left} s left)"
    report
    return 3
  fi
  limit=$want
  if [ "$left" -lt "$want" ]; then
    limit=$left
    note="limit clipped from $want s to the $left s left"
  fi
  log "$name (limit $limit s): $*"
  t0=$(date +%s)
  # timeout signals the command's whole process group; --kill-after bounds a command that ignores it.
  # (Through bash: a stage may be one of the functions exported below.)
  timeout --kill-after=5 "$limit" bash -c '"$@"' bash "$@" >"$dir/$name.log" 2>&1
  rc=$?
  took=$(($(date +%s) - t0))
  if [ $rc -eq 0 ]; then
    result=PASSED
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    result=TIMEOUT
    note="${note:+$note; }cut at $limit s"
  elif [ $rc -eq 77 ]; then
    result=SKIPPED
    note="${note:+$note; }$(grep -m1 -iE 'skip' "$dir/$name.log" | cut -c1-120)"
  else
    result="FAILED (exit $rc)"
    note="${note:+$note; }$(tail -n 1 "$dir/$name.log" | cut -c1-160)"
  fi
  record "$name" "$result" "$took" "$limit" "$note"
  log "$name: $result in ${took} s"
  report
  return $rc
}

skip() { # skip <name> <why>
  record "$1" SKIPPED 0 0 "$2"
  log "$1: SKIPPED ($2)"
}

probe() {
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || cat .gpu-deps/commit 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
    echo "nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -n 2 | head -n 1)"
    echo "ncu: $( (ncu --version 2>/dev/null || /usr/local/cuda/bin/ncu --version 2>/dev/null) | tail -n 1)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
    echo "torch: $($python -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -n 1)"
    echo "binaries: $bdir ($( [ -f .gpu-deps/prebuilt.tar.xz ] && echo "packed by gpu-pack.sh" || echo "built here"))"
  } >"$dir/machine.txt"
  cat "$dir/machine.txt"
}

# The loader's path for programs built elsewhere: NCCL from PyTorch's wheels if nothing else has
# it, the CUDA toolkit's libraries, the MPI libraries gpu-pack.sh carried; and the binaries.
find_libraries() {
  if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2'; then
    local nccl
    nccl=$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -n 1)
    [ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname "$nccl")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  [ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64"
  if [ -f .gpu-deps/prebuilt.tar.xz ] && [ ! -x "$bdir/tests/cohort_cuda_tests" ]; then
    tar -xJf .gpu-deps/prebuilt.tar.xz && log "unpacked .gpu-deps/prebuilt.tar.xz into $bdir"
  fi
  [ -d .gpu-deps/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu-deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The test binaries read the fixtures' path from the environment (tests/support/fixture_dir.hpp).
  export COHORT_FIXTURE_DIR="$PWD/tests/reference/fixtures"
  command -v ncu >/dev/null || { [ -x /usr/local/cuda/bin/ncu ] && export PATH="$PATH:/usr/local/cuda/bin"; }
  log "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  ldd "$bdir/tests/cohort_cuda_tests" 2>&1 | grep -E 'not found' | sed 's/^/gpu-check: ldd: /' >&2
  return 0
}

cuda_tests_summary() {
  grep -E '^\[doctest\] (test cases|assertions)' "$dir/cuda_tests.log" >"$dir/cuda_tests.summary" 2>/dev/null
  # doctest counts a case that printed COHORT_SKIP (too few GPUs) as passed: say so.
  grep -o 'COHORT_SKIP: .*' "$dir/cuda_tests.log" 2>/dev/null | sort | uniq -c |
    sed 's/^ *\([0-9]*\) COHORT_SKIP: /counted as passed, but skipped their checks: \1 case(s), /' >>"$dir/cuda_tests.summary"
  grep -E '^\[doctest\] (test cases|assertions)' "$dir/cuda_tests_ddp.log" 2>/dev/null |
    sed 's/^/ProcessGroupDDP: /' >>"$dir/cuda_tests.summary"
  return 0
}

# correctness <precision> <floor>: ResNet-20's first 50 steps (file order) on GPU 0 against the
# CPU backend's losses of the same steps (train_mnist, packed by gpu-pack.sh). Step k's relative
# difference must stay within max(floor, 3 x the drift up to step k between the CPU backend and
# the device kernels on the CPU's cores, packed too): rounding differences grow as training goes
# on (between those two: 1e-6 at step 1, 1e-4 at step 2, 4e-3 at step 9, 7% by step 43 in fp32).
correctness() {
  local p=$1 bound=$2 ref=.gpu-deps/reference/resnet_$1.log env=.gpu-deps/reference/resnet_$1_envelope.log
  [ -f "$ref" ] || { echo "no CPU reference $ref: run scripts/gpu-pack.sh"; return 1; }
  "$bdir/examples/train_on_device_cuda" --model resnet --precision "$p" --max-steps 50 --no-shuffle --log-interval 1 \
    --data-dir "$data_dir" >"$dir/correctness_${p}_run.txt" 2>&1 || { tail -n 5 "$dir/correctness_${p}_run.txt"; return 1; }
  $python scripts/gpu_report.py compare-losses "$ref" "$dir/correctness_${p}_run.txt" --bound "$bound" \
    --envelope "$env" --factor 3 \
    --label "ResNet-20 $p" --json "$dir/correctness_$p.json"
}

cohort_timing() { # cohort_timing <model>
  "$bdir/examples/train_on_device_cuda" --model "$1" --precision fp32,tf32,fp16,bf16 --windows 3 --warmup-steps 20 \
    --window-steps 50 --data-dir "$data_dir" --timing "$dir/cohort.jsonl"
}

profile() {
  local ncu_bin
  ncu_bin=$(command -v ncu) || { echo "skipped: no ncu on this machine"; return 77; }
  # One metric per launch keeps ncu's replay short; the program profiles 2 steps after 5 warm ones.
  "$ncu_bin" --profile-from-start off --csv --metrics gpu__time_duration.sum --log-file "$dir/profile.csv" \
    "$bdir/examples/train_on_device_cuda" --model resnet --precision fp32 --windows 1 --warmup-steps 5 \
    --window-steps 1 --profile-steps 2 --data-dir "$data_dir" || return 1
  local waits csv=$dir/profile.csv
  waits=$(sed -n 's/^profiled [0-9]* step(s): \([0-9.]*\) host waits per step$/\1/p' "$dir/profile.log" | tail -n 1)
  # (Should this ncu print its table with the program's output rather than into --log-file.)
  grep -q '"ID"' "$csv" 2>/dev/null || csv=$dir/profile.log
  $python scripts/gpu_report.py ncu-summary "$csv" --steps 2 ${waits:+--host-waits "$waits"} \
    --json "$dir/profile.json"
}

# Two ranks on GPU 0, told apart by NCCL_HOSTID (NCCL then treats them as two hosts: sockets).
nccl_two_ranks() {
  local bin=$bdir/tests/cohort_nccl_two_ranks failed=0 c rank pids
  [ -x "$bin" ] || { echo "no $bin (built with NCCL only)"; return 1; }
  : >"$dir/nccl.jsonl"
  for c in allreduce bf16 fp16 watchdog; do
    local rv
    rv=$(mktemp -d)
    pids=()
    for rank in 0 1; do
      # Loopback sockets between the two "hosts"; no InfiniBand probing; NCCL's warnings in the log.
      NCCL_HOSTID="cohort-rank$rank" NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN "$bin" --rank "$rank" --dir "$rv" --case "$c" --timeout 20 \
        >"$dir/nccl_${c}_rank$rank.txt" 2>&1 &
      pids+=($!)
    done
    wait "${pids[0]}" || failed=1
    if [ "$c" = watchdog ]; then wait "${pids[1]}"; else wait "${pids[1]}" || failed=1; fi
    grep -h '^{' "$dir/nccl_${c}_rank0.txt" "$dir/nccl_${c}_rank1.txt" >>"$dir/nccl.jsonl"
    cat "$dir/nccl_${c}_rank0.txt" "$dir/nccl_${c}_rank1.txt"
    rm -rf "$rv"
  done
  return $failed
}

do_build() {
  local args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=native)
  [ -d .gpu-deps/prefix ] && args+=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps/prefix")
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  stage configure 300 cmake -S . -B build-gpu "${args[@]}" &&
    stage build 580 cmake --build build-gpu -j "$(nproc)" --target cohort_cuda_tests train_on_device_cuda \
      cohort_nccl_two_ranks
}

run_all() {
  : >"$dir/stages.jsonl"
  rm -f "$dir"/cohort.jsonl "$dir"/torch.jsonl "$dir"/nccl.jsonl "$dir"/profile.json "$dir"/correctness_*.json
  stage probe 60 probe
  local gpu_stages=(cuda_tests cuda_tests_ddp correctness_fp32 correctness_bf16 cohort_resnet cohort_A cohort_B cohort_C
    cohort_D torch_eager profile nccl_two_ranks torch_compile)
  if [ "$gpus" -eq 0 ]; then
    log "no NVIDIA GPU visible: every GPU stage is skipped"
    if [ "${GPU_CHECK_SELFTEST:-0}" = 1 ]; then
      # A stage that hangs: cut at its limit, clipped to the deadline (the CI test checks both).
      stage selftest_hang 600 sleep 100000
      stage selftest_after_deadline 60 true
    fi
    for s in "${gpu_stages[@]}"; do skip "$s" "no GPU"; done
    report
    exit 77
  fi
  find_libraries
  if [ ! -x "$bdir/tests/cohort_cuda_tests" ]; then # nothing packed: build here, within the deadline
    log "no prebuilt binaries in $bdir (scripts/gpu-pack.sh --prebuilt): building build-gpu/ here"
    bdir=build-gpu
    export bdir
    do_build
  fi
  stage cuda_tests 150 "$bdir/tests/cohort_cuda_tests" --no-intro --no-version --duration=true \
    --test-case-exclude='*ProcessGroupDDP*'
  stage cuda_tests_ddp 60 "$bdir/tests/cohort_cuda_tests" --no-intro --no-version --duration=true \
    --test-case='*ProcessGroupDDP*'
  cuda_tests_summary
  stage correctness_fp32 60 correctness fp32 1e-4
  stage correctness_bf16 60 correctness bf16 1e-2
  local m
  for m in resnet A B C D; do stage "cohort_$m" 60 cohort_timing "$m"; done
  stage torch_eager 200 "$python" bench/torch_gpu_seed.py --models resnet,A,B,C,D \
    --configs nchw-fp32,nchw-tf32,cl-tf32,cl-bf16,cl-fp16 --data-dir "$data_dir" --out "$dir/torch.jsonl"
  stage profile 90 profile
  stage nccl_two_ranks 120 nccl_two_ranks
  stage torch_compile 300 "$python" bench/torch_gpu_seed.py --models resnet,A,B,C,D \
    --configs cl-bf16-compile,nchw-tf32-compile --data-dir "$data_dir" --out "$dir/torch.jsonl"
  report
  cat "$dir/report.md"
  grep -qE '"result": "(FAILED|TIMEOUT)' "$dir/stages.jsonl" && return 1
  return 0
}

# Stages are functions run under `timeout`: export them (and what they use) to its bash.
export -f correctness cohort_timing profile nccl_two_ranks probe log
export dir bdir data_dir python gpus deadline_s PATH LD_LIBRARY_PATH
case $mode in
all) run_all ;;
build) do_build ;;
report) $python scripts/gpu_report.py write "$dir" ${out:+"$out"} --print ;;
*)
  echo "usage: scripts/gpu-check.sh [all|build|report]" >&2
  exit 2
  ;;
esac
