#!/usr/bin/env python3
"""docs.snippets: every C++ block of README.md is either a compiled snippet or says why not.

A block preceded by "<!-- snippet: NAME[, NAME...] -->" must equal the regions NAME of
tests/docs/readme.cpp (between two "//! [NAME]" lines), joined by a blank line, after removing
their common indentation. A block preceded by "<!-- not compiled: REASON -->" is exempt. Any other
```cpp block fails, as does a snippet name that no region has.

    check_snippets.py README.md tests/docs/readme.cpp
"""
import re
import sys
import textwrap


def regions(source):
    out, name, lines = {}, None, []
    for line in open(source).read().splitlines():
        m = re.match(r"^\s*//! \[(.+)\]\s*$", line)
        if m and name is None:
            name, lines = m[1], []
        elif m and m[1] == name:
            out[name] = textwrap.dedent("\n".join(lines)).strip("\n")
            name = None
        elif name is not None:
            lines.append(line)
    if name is not None:
        sys.exit(f"{source}: region '{name}' is not closed")
    return out


def main(readme, source):
    known = regions(source)
    text = open(readme).read().splitlines()
    problems, checked = [], 0
    i = 0
    while i < len(text):
        if text[i].strip() != "```cpp":
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(text) and text[j].strip() != "```":
            j += 1
        block = "\n".join(text[start + 1:j]).strip("\n")
        k = start - 1
        while k >= 0 and not text[k].strip():
            k -= 1
        marker = text[k].strip() if k >= 0 else ""
        m = re.match(r"^<!-- snippet: (.+) -->$", marker)
        if m:
            names = [n.strip() for n in m[1].split(",")]
            missing = [n for n in names if n not in known]
            if missing:
                problems.append(f"{readme}:{start + 1}: no region {missing} in {source}")
            else:
                want = "\n\n".join(known[n] for n in names)
                if want != block:
                    problems.append(f"{readme}:{start + 1}: the block differs from {source}'s region(s) {names}:\n"
                                    f"--- README\n{block}\n--- {source}\n{want}")
                checked += 1
        elif not re.match(r"^<!-- not compiled: .+ -->$", marker):
            problems.append(f"{readme}:{start + 1}: a C++ block with neither '<!-- snippet: NAME -->' nor "
                            f"'<!-- not compiled: REASON -->' before it")
        i = j + 1
    for p in problems:
        print(p)
    print(f"check_snippets: {checked} README block(s) match {source}; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
