#!/usr/bin/env python3
"""The direct convolution's register tile stays in registers under GCC's Skylake-family
tunings (include/cohort/backend/cpu/simd.hpp, "Register tiles"): one AVX-512 forward kernel
compiled to assembly with -mtune=skylake-avx512 and icelake-server must have at most one vector
stack access in its loops per 10 FMAs there. Before the unroll pragmas: 864 accesses for 432 FMAs
(every accumulator in memory); after: 4 for 432 (spills of loop-invariant values in outer loops). Skipped (77) without g++ on x86-64. ~15 s."""
import os
import platform
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
sys.path.insert(0, os.path.join(ROOT, 'scripts'))
from register_tiles import loop_stack_accesses  # noqa: E402

TU = '''#include <cohort/backend/cpu.hpp>
using G = cohort::Conv2dGeometry<16, 16, 28, 28, 3, 1, 1>;
void run(const float* x, std::size_t n, const float* w, float* y) {
  cohort::cpu::direct::forward_samples_dispatch<G>(cohort::Isa::avx512, x, n, w, nullptr, y);
}
'''

def main():
    cxx = os.environ.get('CXX', 'g++')
    if platform.machine() not in ('x86_64', 'AMD64') or not shutil.which(cxx) or 'clang' in cxx:
        print('COHORT_SKIP: needs g++ on x86-64')
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'tile.cpp')
        open(src, 'w').write(TU)
        for tune in ('skylake-avx512', 'icelake-server'):
            out = os.path.join(tmp, tune + '.s')
            subprocess.run([cxx, '-std=c++20', '-O3', '-DNDEBUG', '-DCOHORT_CPU_ALL_ISAS=1', '-mtune=' + tune,
                            '-I' + os.path.join(ROOT, 'include'), '-S', src, '-o', out], check=True)
        found = {d: v for d, v in loop_stack_accesses(tmp).items() if 'forward_samples_avx512' in d}
        if not found:
            print('FAIL: no forward_samples_avx512 function in the assembly')
            return 1
        bad = {d: v for d, v in found.items() if 10 * v[0] > v[1]}
        for d, (s, f) in found.items():
            print(f'{s} stack accesses, {f} FMAs in loops: {d[:120]}')
        if bad:
            print("FAIL: the direct kernel's accumulators are in memory under a Skylake-family -mtune")
            return 1
    return 0

if __name__ == '__main__':
    sys.exit(main())
