#!/usr/bin/env python3
"""Fails (naming them) when a file in src/ is over 800 lines or a C
function over 80, the sizes docs/internals.md ("Size") sets; the
evaluator src/jsonschema/validate.c is the one exception the docs explain.
Functions are found by layout (.clang-format puts a function's braces in
column 0), so this reads the code as make format leaves it."""
import pathlib
import sys

MAX_FILE, MAX_FUNCTION = 800, 80
EXCEPT = {"src/jsonschema/validate.c"}


def functions(lines):
    """(name line, length) of each function: from its '{' to its '}'."""
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            j = i - 1
            while j > 0 and "(" not in lines[j]:
                j -= 1
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            yield lines[j].strip(), k - i + 1
            i = k
        i += 1


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    bad = []
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in (".c", ".h", ".mjs") or not path.is_file():
            continue
        rel = str(path.relative_to(root))
        if rel in EXCEPT:
            continue
        lines = path.read_text(errors="replace").split("\n")
        if len(lines) - 1 > MAX_FILE:
            bad.append(f"{rel}: {len(lines) - 1} lines (at most {MAX_FILE}: split it at a seam)")
        if path.suffix == ".c":
            for name, n in functions(lines):
                if n > MAX_FUNCTION:
                    bad.append(f"{rel}: {name[:60]}... is {n} lines (at most {MAX_FUNCTION})")
    for b in bad:
        print(f"size: {b}", file=sys.stderr)
    if bad:
        sys.exit(1)
    print("size: every file in src/ is within 800 lines and every function within 80")


main()
