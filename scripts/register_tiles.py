#!/usr/bin/env python3
"""Vector stack accesses inside loops, per function, of the .s files in argv[1] (scripts/register-tiles.sh)."""
import re, sys, subprocess, glob, collections

res = collections.Counter(); fmas = collections.Counter()
jmp = re.compile(r'^\tj\w+\s+(\.L\d+)')
for f in sorted(glob.glob(sys.argv[1] + '/*.s')):
    fn = None; body = []
    for line in open(f):
        if line.startswith('\t.type') and '@function' in line:
            fn = line.split()[1].rstrip(','); body = []
        elif fn and line.startswith('\t.size') and fn in line:
            labels = {}
            inloop = [False] * len(body)
            for i, l in enumerate(body):
                m = re.match(r'^(\.L\d+):', l)
                if m: labels[m.group(1)] = i
                m = jmp.match(l)
                if m and m.group(1) in labels:
                    for k in range(labels[m.group(1)], i + 1): inloop[k] = True
            for i, l in enumerate(body):
                if inloop[i] and l.startswith('\tv'):
                    if re.search(r'%[xyz]mm', l) and '(%rsp)' in l: res[fn] += 1
                    if 'fmadd' in l or 'dpbf16' in l: fmas[fn] += 1
            fn = None
        elif fn: body.append(line)
names = [n for n in res if res[n] > 0]
dem = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
rows = sorted(((res[n], fmas[n], d) for n, d in zip(names, dem)), reverse=True)
for r in rows[:int(sys.argv[2]) if len(sys.argv) > 2 else 40]:
    print(f'{r[0]:6d} stack-in-loop / {r[1]:6d} fma-in-loop  {r[2][:200]}')
