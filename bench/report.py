"""What the bench drivers share: printing a result table (aligned text or Markdown) and
appending result rows to a JSON-lines file."""
import json


def print_table(head, lines, markdown):
    """Prints rows of strings under `head`: Markdown, or columns padded to their widest cell."""
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    width = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(width[i]) for i, h in enumerate(head)))
    for line in lines:
        print("  ".join(c.ljust(width[i]) for i, c in enumerate(line)))


def append_jsonl(path, rows):
    """Appends one JSON line per row to `path` (nothing when path is empty)."""
    if not path:
        return
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
