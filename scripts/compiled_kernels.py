#!/usr/bin/env python3
"""The compiled kernel library's list of instantiations (issue 32).

    scripts/compiled_kernels.py                 rewrite include/cohort/backend/cpu/compiled_instances.hpp
    scripts/compiled_kernels.py --check OBJ...  fail if any object file defines a kernel entry point
                                                that the list holds (it was compiled again) or that a
                                                registered network needs and the list lacks
        [--library libcohort_kernels.a]         or an executor pass (forward, backward) that the
                                                library defines (network/compiled_executor.hpp)

The first form compiles src/kernel_registry.cpp header-only at -O0 (every entry point it uses is
then emitted as a weak symbol), reads the CPU op families' entry points from its symbols, and
writes them as X-macro lists, split into chunks the library compiles in parallel
(src/cpu_kernels_N.cpp): all entries of one geometry in one chunk, so the helpers they share are
instantiated once.

The second form is the ctest kernels.registry_complete: it runs nm on objects built in compiled
mode (the train_mnist models) and fails, naming the symbol, if one of them instantiated a kernel
entry point itself (a registered network's kernel missing from the list, or a list that no longer
matches the headers' signatures).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "include/cohort/backend/cpu/compiled_instances.hpp")
REGISTRY = os.path.join(ROOT, "src/kernel_registry.cpp")
CHUNKS = 8
# The op families whose entry points are templates on the layer's geometry (the rest of the CPU
# backend is not geometry-specific).
ENTRY = re.compile(r"^(void|double) cohort::ops::(Conv2d|BatchNorm|Pool|Linear)Kernels<cohort::Cpu>::(\w+)<(.*)$")
# Relative compile cost of one entry point, for balancing the chunks (measured: a convolution's
# entries instantiate the direct, Winograd and im2col paths for three instruction sets).
WEIGHT = {"Conv2d": 10, "BatchNorm": 3, "Linear": 2, "Pool": 1}


def entry_points(obj):
    out = subprocess.run(["nm", "-C", "--defined-only", obj], check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in ("W", "T", "t", "w"):
            m = ENTRY.match(parts[2])
            if m:
                found.append((m, parts[2]))
    return found


# The executor passes compiled mode declares extern for the registered networks: those of whole
# networks (Sequential), not of the blocks' branches (layer_chain), which only they reach.
EXECUTOR_PASS = re.compile(r"^cohort::Executor<cohort::Sequential<.*>::(forward|backward)\(")


def executor_passes(obj, kinds):
    """The executor passes an object (or archive) defines with symbol types in `kinds`."""
    out = subprocess.run(["nm", "-C", "--defined-only", obj], check=True, capture_output=True, text=True).stdout
    found = set()
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in kinds and EXECUTOR_PASS.match(parts[2]) and "::{lambda" not in parts[2]:
            found.add(parts[2])
    return found


def portable(sig):
    """nm's spelling made portable C++: size_t literals without the LP64 suffix, size_t by name."""
    sig = re.sub(r"\b(\d+)ul\b", r"\1", sig)
    return sig.replace("unsigned long", "std::size_t")


def geometry_key(m):
    # The first template argument: the geometry (or Linear's In, Out).
    args = m.group(4)
    depth = 0
    for i, c in enumerate(args):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            return m.group(2) + ":" + (args[:i] if m.group(2) != "Linear" else args[: args.index(",", i + 1)])
    return args


def generate(cxx, registry_object=None):
    if registry_object:
        found = entry_points(registry_object)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            obj = os.path.join(tmp, "registry.o")
            cmd = [cxx, "-std=c++20", "-O0", "-w", "-I" + os.path.join(ROOT, "include"), "-c", REGISTRY, "-o", obj]
            subprocess.run(cmd, check=True)
            found = entry_points(obj)
    groups = {}
    for m, sig in found:
        groups.setdefault(geometry_key(m), []).append((m.group(2), portable(sig)))
    # Heaviest groups first, each into the lightest chunk so far.
    chunks = [[] for _ in range(CHUNKS)]
    load = [0] * CHUNKS
    for key in sorted(groups, key=lambda k: (-sum(WEIGHT[f] for f, _ in groups[k]), k)):
        i = load.index(min(load))
        chunks[i] += [sig for _, sig in sorted(groups[key], key=lambda e: e[1])]
        load[i] += sum(WEIGHT[f] for f, _ in groups[key])
    lines = [
        "#pragma once",
        "/// \\file",
        "/// The CPU kernel entry points compiled once into the cohort::kernels library: those of the",
        "/// networks src/kernel_registry.cpp lists, in every precision. Generated by",
        "/// scripts/compiled_kernels.py: do not edit. backend/cpu/compiled_kernels.hpp declares them",
        "/// `extern template` in compiled mode; src/cpu_kernels_N.cpp instantiates chunk N.",
        "",
        "// clang-format off",
        "#define COHORT_CPU_KERNEL_CHUNKS %d" % CHUNKS,
        "",
    ]
    for i, chunk in enumerate(chunks):
        lines.append("// Chunk %d: %d entry points (relative cost %d)." % (i, len(chunk), load[i]))
        lines.append("#define COHORT_CPU_KERNEL_INSTANCES_%d(X) \\" % i)
        for sig in chunk:
            lines.append("  X(%s) \\" % sig)
        lines.append("  /* end of chunk %d */" % i)
        lines.append("")
    lines.append("// clang-format on")
    with open(HEADER, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("compiled_kernels: %d entry points of %d geometries in %d chunks -> %s"
          % (len(found), len(groups), CHUNKS, os.path.relpath(HEADER, ROOT)))


def check(objects, library=None):
    # $<TARGET_OBJECTS> lists a target's precompiled header too (cohort_precompile): not an object.
    objects = [o for o in objects if not o.endswith(".gch")]
    listed = set()
    with open(HEADER) as f:
        for line in f:
            if line.startswith("  X("):
                listed.add(line[4:].rstrip().rstrip("\\").rstrip()[:-1])
    bad = 0
    for obj in objects:
        for _, sig in entry_points(obj):
            bad += 1
            state = "is listed but was compiled here again" if portable(sig) in listed else "is not in the list"
            print("%s: kernel entry point %s: %s" % (obj, state, sig))
    if library:
        compiled = executor_passes(library, ("W", "T"))
        if not compiled:
            print("%s: defines no executor pass (network/compiled_executor.hpp, src/executors_*.cpp)" % library)
            bad += 1
        for obj in objects:
            for sig in sorted(executor_passes(obj, ("W", "T", "t", "w")) & compiled):
                bad += 1
                print("%s: executor pass compiled here again, the library defines it: %s" % (obj, sig))
    if bad:
        print("kernels.registry_complete: FAILED: %d entry points compiled outside the kernel library; "
              "run scripts/compiled_kernels.py after changing src/kernel_registry.cpp or an entry point's signature" % bad)
        return 1
    print("kernels.registry_complete: %d objects use only the library's kernel entry points (%d listed)"
          % (len(objects), len(listed)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", nargs="+", metavar="OBJ", help="object files built in compiled mode")
    ap.add_argument("--library", help="with --check: the kernel library, whose executor passes no object may define")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--registry-object", help="use this object of src/kernel_registry.cpp instead of compiling it")
    a = ap.parse_args()
    if a.check:
        return check(a.check, a.library)
    generate(a.cxx, a.registry_object)
    return 0


if __name__ == "__main__":
    sys.exit(main())
