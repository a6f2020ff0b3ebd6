#!/usr/bin/env python3
"""Says what the test suite ran, group by group, from ctest's JUnit report, and fails when a group
this machine can run is missing: a suite that silently drops a group must not look green.

    ctest --test-dir build --output-junit ctest-junit.xml
    python3 scripts/test_groups.py build/ctest-junit.xml --require cpu device_omp mpi ...

Groups, by test name: device_omp.* (the device kernels on Thrust's OpenMP system), mpi.* (mpirun),
cuda.* (the nvcc build: compiled here, skipped without a GPU: cuda-compile), packaging.*,
format.*, asan.* / tsan.* (sanitizer builds), fuzz.* (libFuzzer runs), and cpu (everything else:
the host suite, its COHORT_ISA reruns, compile-fail tests, PyTorch references, the example trainer).
A required group must have tests that passed, except cuda-compile, which passes by building.
Skipped tests are listed with the reason their output gives.
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET

PREFIXES = (("device_omp.", "device_omp"), ("mpi.", "mpi"), ("cuda.", "cuda-compile"), ("packaging.", "packaging"),
            ("format.", "format"), ("asan.", "asan"), ("tsan.", "tsan"), ("fuzz.", "fuzz"))
SKIP_LINE = re.compile(r"^.*\b(COHORT_SKIP|SKIP|skipped)\b:?\s*(.*)$", re.MULTILINE)


def group_of(name):
    for prefix, group in PREFIXES:
        if name.startswith(prefix):
            return group
    return "cpu"


def skip_reason(case):
    out = case.findtext("system-out") or ""
    m = SKIP_LINE.search(out)
    if m:
        return m.group(0).strip()[:160]
    sk = case.find("skipped")
    return sk.get("message", "") if sk is not None else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit")
    ap.add_argument("--require", nargs="*", default=[], help="groups this machine can run")
    args = ap.parse_args()
    try:
        cases = ET.parse(args.junit).getroot().iter("testcase")
    except (OSError, ET.ParseError) as e:
        print(f"test groups: cannot read {args.junit}: {e}")
        return 1
    groups = {}
    for c in cases:
        g = groups.setdefault(group_of(c.get("name", "")), {"passed": 0, "failed": 0, "skipped": []})
        status = c.get("status")
        if status == "run":
            g["passed"] += 1
        elif status in ("notrun", "disabled"):
            g["skipped"].append((c.get("name"), skip_reason(c)))
        else:
            g["failed"] += 1
    print("test groups (what ran, from ctest's report):")
    names = list(dict.fromkeys([g for _, g in PREFIXES] + ["cpu"] + sorted(groups)))
    missing = []
    for name in sorted(names, key=lambda n: (n != "cpu", n)):
        g = groups.get(name)
        required = name in args.require
        if g is None:
            state = "MISSING (this machine can run it)" if required else "not run (this machine cannot)"
            print(f"  {name:13s} {state}")
            if required:
                missing.append(name)
            continue
        total = g["passed"] + g["failed"] + len(g["skipped"])
        print(f"  {name:13s} {total:4d} tests: {g['passed']} passed, {len(g['skipped'])} skipped, {g['failed']} failed")
        if required and name != "cuda-compile" and g["passed"] == 0:
            missing.append(name)
    skipped = [(n, s) for g in groups.values() for n, s in g["skipped"]]
    if skipped:
        print("skipped, and why:")
        for n, why in skipped:
            print(f"  {n}: {why or '(no reason printed)'}")
    if missing:
        print(f"test groups: FAILED: required group(s) missing or with nothing passed: {', '.join(missing)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
