#!/bin/sh
# Covenant's stdin/stdout contract: one JSON line in, one JSON line out.
IFS= read -r line || exit 1
text=$(printf '%s' "$line" | sed -n 's/.*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p')
words=$(printf '%s\n' "$text" | wc -w)
printf '{"text":"%s words","sources":[]}\n' "$words"
