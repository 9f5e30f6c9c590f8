#!/usr/bin/env python3
"""Generates capsule.1 (man(7) roff) from docs/cli.md, so the man page and
the command-line reference never drift: the build runs it (src/cli/meson.build).

Usage: gen-man.py docs/cli.md capsule.1 [VERSION]

What it understands of the Markdown docs/cli.md uses: `#` (the title),
`##`/`###` headings (.SH/.SS), paragraphs, `- ` lists, fenced code blocks
(.EX/.EE), pipe tables (a row per .TP: the first cell the tag, the others
its text) and inline `code`, **bold**, *emphasis* and [text](link)."""
import re
import sys


def roff_escape(text):
    """Text safe inside a roff line: backslashes, and hyphens as \\- (so
    options copy and paste as ASCII minus signs)."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def inline(text):
    """Markdown inline markup to roff fonts."""
    text = text.replace("\\|", "|")
    out = []
    # `code`, **bold**, *emphasis*, [text](link), else plain
    for m in re.finditer(r"`([^`]*)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\[([^\]]+)\]\([^)]*\)|([^`*\[]+|[`*\[])", text):
        code, bold, emph, link, plain = m.groups()
        if code is not None:
            out.append("\\fB" + roff_escape(code) + "\\fR")
        elif bold is not None:
            out.append("\\fB" + roff_escape(bold) + "\\fR")
        elif emph is not None:
            out.append("\\fI" + roff_escape(emph) + "\\fR")
        elif link is not None:
            out.append(roff_escape(link))
        else:
            out.append(roff_escape(plain))
    return "".join(out)


def line(text):
    """A text line: one starting with . or ' would be a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def split_row(row):
    """A pipe table's cells (\\| is a literal bar inside a cell)."""
    cells = re.split(r"(?<!\\)\|", row.strip().strip("|")) if row.strip() != "|" else []
    return [c.strip() for c in cells]


def convert(md, version):
    out = [
        '.TH CAPSULE 1 "" "capsule %s" "User Commands"' % version,
        ".\\\" Generated from docs/cli.md by scripts/gen-man.py: edit those, not this.",
        ".nh",  # no hyphenation: option and verb names copy as typed
        ".ad l",
        ".SH NAME",
        "capsule \\- run AI\\-agent tools in a kernel\\-enforced sandbox",
    ]
    lines = md.splitlines()
    i, para = 0, []

    def flush():
        if para:
            out.append(".PP")
            out.extend(line(inline(p)) for p in para)
            para.clear()

    first_code = True
    while i < len(lines):
        text = lines[i]
        if text.startswith("# "):  # the title: the page's NAME says it
            i += 1
            continue
        if text.startswith("```"):
            flush()
            if first_code:  # the usage block opens the page: its SYNOPSIS
                out.append(".SH SYNOPSIS")
                first_code = False
            out.append(".EX")
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line(roff_escape(lines[i])))
                i += 1
            out.append(".EE")
            i += 1
            if ".SH DESCRIPTION" not in out:
                out.append(".SH DESCRIPTION")
            continue
        if text.startswith("## ") or text.startswith("### "):
            flush()
            title = text.lstrip("#").strip()
            if text.startswith("## "):
                # section names in capitals, as man pages have them; code as typed
                parts = re.split(r"(`[^`]*`)", title)
                title = "".join(p if p.startswith("`") else p.upper() for p in parts)
                out.append(".SH " + line(inline(title)))
            else:
                out.append(".SS " + line(inline(title)))
            i += 1
            continue
        if text.startswith("|"):
            flush()
            header = split_row(text)
            i += 2  # the header and its |---| line
            while i < len(lines) and lines[i].startswith("|"):
                cells = split_row(lines[i])
                out.append(".TP")
                out.append(line(inline(cells[0])))
                rest = cells[1:]
                if len(rest) == 1:
                    out.append(line(inline(rest[0])))
                else:  # more columns: each named by its header
                    for name, cell in zip(header[1:], rest):
                        out.append(line(inline(name + ": " + cell)))
                        out.append(".br")
                    out.pop()
                i += 1
            continue
        if re.match(r"^\s*- ", text):
            flush()
            item = [re.sub(r"^\s*- ", "", text)]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and not re.match(r"^\s*- ", lines[i]):
                item.append(lines[i].strip())
                i += 1
            out.append(".IP \\(bu 2")
            out.append(line(inline(" ".join(item))))
            continue
        if not text.strip():
            flush()
        else:
            para.append(text.strip())
        i += 1
    flush()
    out += [".SH SEE ALSO", "The documentation installed in \\fIshare/doc/capsule\\fR: "
            "sandbox.md, egress.md, gateway.md, manifests.md."]
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: gen-man.py docs/cli.md capsule.1 [VERSION]")
    with open(sys.argv[1], encoding="utf-8") as f:
        md = f.read()
    page = convert(md, sys.argv[3] if len(sys.argv) == 4 else "")
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(page)


if __name__ == "__main__":
    main()
