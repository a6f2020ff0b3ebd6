#!/usr/bin/env python3
"""docs.snippets: every C++ block of README.md is either a compiled snippet or says why not;
docs.header_snippets: so is every public header's usage example.

A block preceded by "<!-- snippet: NAME[, NAME...] -->" must equal the regions NAME of
tests/docs/readme.cpp (between two "//! [NAME]" lines), joined by a blank line, after removing
their common indentation. A block preceded by "<!-- not compiled: REASON -->" is exempt. Any other
```cpp block fails, as does a snippet name that no region has.

    check_snippets.py README.md tests/docs/readme.cpp [more sources with regions...]

Headers (--headers): a header comment line "/// Example (compiled: tests/docs/headers.cpp, "NAME"):"
is followed (after blank "///" lines) by an indented block ("///     code") that must equal region
NAME of tests/docs/headers.cpp. "/// Example (not compiled: REASON):" exempts the block after it.
In the directories of PUBLIC (not their subdirectories), every header's first usage block (in its file comment) must carry
one of the two; every region of headers.cpp must be quoted by some header.

    check_snippets.py --headers include tests/docs/headers.cpp
"""
import os
import re
import sys
import textwrap

# Where users look first: each header's opening example must be compiled or say why not.
PUBLIC = ("layers", "models", "optim", "loss", "network", "precision", "data", "io", "train", "parallel", "core",
          "tensor")
COMPILED = re.compile(r'^/// Example \(compiled: tests/docs/headers\.cpp, "([^"]+)"\):$')
NOT_COMPILED = re.compile(r"^/// Example \(not compiled: .+\):$")


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


def main(readme, *sources):
    """`sources`: the files whose regions README blocks may quote (readme.cpp, and programs that run
    a snippet, such as tests/tools/torchvision_resnet.cpp for the fine-tuning one)."""
    known = {}
    for f in sources:
        for name, body in regions(f).items():
            if name in known:
                sys.exit(f"{f}: region '{name}' is defined in another source too")
            known[name] = body
    source = " + ".join(sources)
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


def block_after(lines, i):
    """The indented "///     " block after line i (blank "///" lines skipped before it), dedented."""
    j = i + 1
    while j < len(lines) and lines[j].rstrip() == "///":
        j += 1
    body = []
    while j < len(lines) and (lines[j].startswith("///     ") or lines[j].rstrip() == "///"):
        body.append(lines[j][4:] if lines[j].startswith("/// ") else "")
        j += 1
    return textwrap.dedent("\n".join(body)).strip("\n"), j


def first_block(lines):
    """Line index of the first "///     " line of the file comment, or None."""
    for i, line in enumerate(lines):
        if line.startswith("#include") or (line and not line.startswith("///") and not line.startswith("#pragma")):
            return None
        if line.startswith("///     "):
            return i
    return None


def main_headers(include, source):
    known = regions(source)
    used, problems, checked = set(), [], 0
    for root, _, files in os.walk(include):
        for name in sorted(files):
            if not name.endswith((".hpp", ".cuh")):
                continue
            path = os.path.join(root, name)
            lines = open(path).read().splitlines()
            for i, line in enumerate(lines):
                m = COMPILED.match(line)
                if not m:
                    continue
                block, _ = block_after(lines, i)
                used.add(m[1])
                if m[1] not in known:
                    problems.append(f"{path}:{i + 1}: no region '{m[1]}' in {source}")
                elif known[m[1]] != block:
                    problems.append(f"{path}:{i + 1}: the example differs from {source}'s region '{m[1]}':\n"
                                    f"--- header\n{block}\n--- {source}\n{known[m[1]]}")
                else:
                    checked += 1
            top = os.path.relpath(path, include).split(os.sep)
            if len(top) == 3 and top[1] in PUBLIC:  # cohort/<dir>/<header>: not detail/, engine/, ...
                b = first_block(lines)
                if b is not None:
                    k = b - 1
                    while k >= 0 and lines[k].rstrip() == "///":
                        k -= 1
                    if k < 0 or not (COMPILED.match(lines[k]) or NOT_COMPILED.match(lines[k])):
                        problems.append(f"{path}:{b + 1}: a usage example with neither 'Example (compiled: "
                                        f"tests/docs/headers.cpp, \"NAME\"):' nor 'Example (not compiled: REASON):' "
                                        f"before it")
    for name in sorted(set(known) - used):
        problems.append(f"{source}: region '{name}' is quoted by no header")
    for p in problems:
        print(p)
    print(f"check_snippets: {checked} header example(s) match {source}; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1] == "--headers":
        sys.exit(main_headers(*sys.argv[2:4]))
    sys.exit(main(*sys.argv[1:]))
