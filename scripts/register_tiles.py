#!/usr/bin/env python3
"""Vector stack accesses inside loops, per function, of the .s files in a folder
(scripts/register-tiles.sh; tests/scripts/register_tiles_test.py)."""
import collections
import glob
import re
import subprocess
import sys

JUMP = re.compile(r'^\tj\w+\s+(\.L\d+)')
LABEL = re.compile(r'^(\.L\d+):')


def loop_stack_accesses(folder):
    """{demangled function: (vector stack accesses in loops, FMAs/dot products in loops)}. A loop
    is the text between a label and a later jump back to it."""
    stack, fmas = collections.Counter(), collections.Counter()
    for path in sorted(glob.glob(folder + '/*.s')):
        fn, body = None, []
        for line in open(path):
            if line.startswith('\t.type') and '@function' in line:
                fn, body = line.split()[1].rstrip(','), []
            elif fn and line.startswith('\t.size') and fn in line:
                labels, inloop = {}, [False] * len(body)
                for i, l in enumerate(body):
                    m = LABEL.match(l)
                    if m:
                        labels[m.group(1)] = i
                    m = JUMP.match(l)
                    if m and m.group(1) in labels:
                        for k in range(labels[m.group(1)], i + 1):
                            inloop[k] = True
                stack[fn] += 0
                for i, l in enumerate(body):
                    if inloop[i] and l.startswith('\tv'):
                        if re.search(r'%[xyz]mm', l) and '(%rsp)' in l:
                            stack[fn] += 1
                        if 'fmadd' in l or 'dpbf16' in l:
                            fmas[fn] += 1
                fn = None
            elif fn:
                body.append(line)
    names = list(stack)
    dem = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
    return {d: (stack[n], fmas[n]) for n, d in zip(names, dem)}


if __name__ == '__main__':
    rows = sorted(((s, f, d) for d, (s, f) in loop_stack_accesses(sys.argv[1]).items() if s), reverse=True)
    for s, f, d in rows[:int(sys.argv[2]) if len(sys.argv) > 2 else 40]:
        print(f'{s:6d} stack accesses in loops / {f:6d} FMAs in loops  {d[:200]}')
