#!/usr/bin/env python3
"""Prints the CUE program KubeVela builds from a `.cue` definition file: its imports followed by
the declarations inside the top-level `template: { ... }` struct. Used by regen-cue-goldens.sh."""
import re
import sys

text = open(sys.argv[1]).read()
imports = "\n".join(m.group(0) for m in re.finditer(r'(?ms)^import\s*(\([^)]*\)|"[^"\n]*")', text))
start = re.search(r"(?m)^template:\s*\{", text)
if not start:
    sys.exit(f"no template in {sys.argv[1]}")
i = start.end()
depth = 1
body_start = i
while i < len(text) and depth > 0:
    c = text[i]
    if text.startswith("//", i):
        i = text.index("\n", i) if "\n" in text[i:] else len(text)
        continue
    if text.startswith('"""', i):
        i = text.index('"""', i + 3) + 3
        continue
    if c == '"':
        i += 1
        while text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        i += 1
        continue
    if c == "{":
        depth += 1
    elif c == "}":
        depth -= 1
    i += 1
print(imports)
print(text[body_start : i - 1])
