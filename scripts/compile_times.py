#!/usr/bin/env python3
"""Per-translation-unit compile times of a Ninja build directory (issue 32).

    scripts/compile_times.py build                 the 25 slowest steps and the time per target
    scripts/compile_times.py build -n 40 --all     more rows; link steps too
    scripts/compile_times.py build --cpu           CPU seconds from scripts/time_compile.sh

Reads BUILD/.ninja_log (Ninja's record of every step: start and end in ms, output path); when a
step ran more than once, its last run counts. Prints markdown: the slowest compile steps, then
the compiler time per target (the sum of its steps: CPU-seconds on a machine that is not
oversubscribed), the total, and the wall time from the first step's start to the last one's end.
The times are wall times of each step, so measure on an otherwise idle machine. With --cpu it
reads BUILD/compile_times.tsv instead, which the launcher scripts/time_compile.sh writes: each
compilation's user + system CPU seconds, meaningful on a busy machine too.
"""
import argparse
import os
import re
import sys


def read_log(build):
    path = os.path.join(build, ".ninja_log")
    if not os.path.exists(path):
        sys.exit("compile_times: %s not found (configure with -G Ninja and build first)" % path)
    steps = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            start, end, output = int(parts[0]), int(parts[1]), parts[3]
            # A restarted log (a newer build) starts again at 0: later lines replace earlier ones.
            steps[output] = (start, end)
    return steps


def read_cpu_log(build):
    path = os.path.join(build, "compile_times.tsv")
    if not os.path.exists(path):
        sys.exit("compile_times: %s not found (configure with -DCMAKE_CXX_COMPILER_LAUNCHER=scripts/time_compile.sh)" % path)
    steps = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 5:
                continue
            try:
                cpu = float(parts[0]) + float(parts[1])
            except ValueError:
                continue
            # As (start, end) pairs in ms whose difference is the CPU time; no wall span.
            steps[parts[4]] = (0, int(cpu * 1000))
    return steps


def target_of(output):
    """The CMake target a step belongs to: <dir>/CMakeFiles/<target>.dir/... -> target."""
    m = re.search(r"CMakeFiles/([^/]+)\.dir/", output)
    if m:
        return m.group(1)
    return "(link) " + os.path.basename(output)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", help="a Ninja build directory")
    ap.add_argument("-n", type=int, default=25, help="rows of the slowest-steps table (default 25)")
    ap.add_argument("--all", action="store_true", help="count link steps in the slowest-steps table too")
    ap.add_argument("--cpu", action="store_true", help="CPU seconds per compilation (BUILD/compile_times.tsv)")
    a = ap.parse_args()
    steps = read_cpu_log(a.build) if a.cpu else read_log(a.build)
    if not steps:
        sys.exit("compile_times: no steps in %s/.ninja_log" % a.build)
    compiles = {o: (s, e) for o, (s, e) in steps.items() if o.endswith((".o", ".obj"))}
    table = steps if a.all else compiles
    rows = sorted(table.items(), key=lambda kv: kv[1][0] - kv[1][1])
    unit = "CPU seconds" if a.cpu else "seconds"
    print("| # | %s | step |" % unit)
    print("|---:|---:|---|")
    for i, (out, (s, e)) in enumerate(rows[: a.n], 1):
        print("| %d | %.1f | `%s` |" % (i, (e - s) / 1000.0, out))
    per_target = {}
    for out, (s, e) in steps.items():
        t = target_of(out)
        n, secs = per_target.get(t, (0, 0.0))
        per_target[t] = (n + 1, secs + (e - s) / 1000.0)
    print()
    print("| target | steps | compiler %s |" % unit)
    print("|---|---:|---:|")
    for t, (n, secs) in sorted(per_target.items(), key=lambda kv: -kv[1][1]):
        if secs >= 1.0:
            print("| %s | %d | %.0f |" % (t, n, secs))
    total = sum(e - s for s, e in steps.values()) / 1000.0
    print()
    if a.cpu:
        print("%d compilations: %.0f CPU seconds in all" % (len(steps), total))
    else:
        wall = (max(e for _, e in steps.values()) - min(s for s, _ in steps.values())) / 1000.0
        print("%d steps (%d compiles): %.0f s of steps in all, %.0f s from first start to last end"
              % (len(steps), len(compiles), total, wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
