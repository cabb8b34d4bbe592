#!/usr/bin/python3
"""Fails on a dangling documentation reference.

Usage: check_docs.py CHECKOUT_ROOT

Checks, with the standard library only:
  (a) every relative Markdown link [text](path) or [text](path#anchor) in README.md and
      docs/*.md names a file that exists and, with an anchor, a heading of that file (GitHub's
      slugs: lower case, punctuation dropped, spaces as hyphens, -1, -2 ... for repeats);
  (b) every docs/<name>.md mentioned in the code, tests, deploy files, scripts, benchmarks,
      fuzzers and build files exists, and where a quoted section name follows it
      (docs/deploy.md, "Container image" or docs/packages.md "Packages"), that file has a
      heading of that name (the whole heading, or its start up to a word boundary; backticks
      and emphasis ignored, case too);
  (c) no file of the checkout (but .git, node_modules and build trees) cites the old design
      document or a section of the README: those sections live in docs/ now;
  (d) README.md is at most MAX_README_LINES lines and opens with the title and the fenced block
      of the two commands, make run and make test.
Prints one line per problem and exits 1, else a summary line and exits 0.
"""

import os
import re
import sys

MAX_README_LINES = 350

# Searched for docs/<name>.md references (b); a directory is walked, a file read as it is.
REFERENCE_ROOTS = ["src", "tests", "deploy", "scripts", "bench", "fuzz", "examples", ".ci",
                   "Makefile", "CMakeLists.txt", "README.md", "docs"]
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".cache", ".ci-logs"}

# Written in pieces so that this file does not match what it looks for.
OLD_DESIGN = "DESIGN" + ".md"
# The word README followed by a quoted name (with a comma, a colon or only a space between, the
# quote escaped or not), or by a comma and a capitalised word: a section of the README.
# "README.md", "the README's" and "README table" are not.
README_SECTION = re.compile(r'README(?:,|:)? ?\\?"|README, [A-Z][a-z]')

LINK = re.compile(r'!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# docs/<name>.md, then optionally a quoted section: "...", \"...\" (C++ and JSON strings), which
# may run on over one line break and a comment leader (# // * --).
DOC_REF = re.compile(
    r'(?<![\w/.-])docs/([A-Za-z0-9_.-]+\.md)'
    r'(?:,?(?: |\n[ \t]*(?:#+|//+|\*|--)?[ \t]*)?\\?"([^"\\\n]+(?:\n[ \t]*(?:#+|//+|\*|--)?[ \t]*[^"\\\n]+)?)\\?")?')


def is_skipped_dir(name):
    return name in SKIP_DIRS or name == "build" or name.startswith("build-")


def walk(root, rel):
    path = os.path.join(root, rel)
    if os.path.isfile(path):
        yield rel
        return
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not is_skipped_dir(d))
        for name in sorted(filenames):
            yield os.path.relpath(os.path.join(dirpath, name), root)


def read_text(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", "replace")


def plain(text):
    """A heading or section name as compared: no markup, one space, lower case."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("`", "").replace("**", "").replace("__", "")
    return " ".join(text.split()).lower()


def slug(text):
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(text):
    """The headings of a Markdown text (outside fenced blocks), as written."""
    found, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = HEADING.match(line)
        if m:
            found.append(m.group(2))
    return found


def anchors(text):
    seen, out = {}, set()
    for h in headings(text):
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def has_section(text, section):
    want = plain(section)
    for h in headings(text):
        have = plain(h)
        if have == want:
            return True
        if have.startswith(want) and not have[len(want)].isalnum():
            return True
    return False


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def check_links(root, problems):
    files = ["README.md"] + ["docs/" + n for n in sorted(os.listdir(os.path.join(root, "docs")))
                             if n.endswith(".md")] if os.path.isdir(os.path.join(root, "docs")) \
        else ["README.md"]
    cache, count = {}, 0
    for rel in files:
        text = read_text(os.path.join(root, rel)) or ""
        fenced = False
        for number, line in enumerate(text.splitlines(), 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            for m in LINK.finditer(line):
                target = m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                    continue
                count += 1
                path, _, anchor = target.partition("#")
                if path:
                    dest = os.path.normpath(os.path.join(os.path.dirname(rel), path))
                else:
                    dest = rel
                full = os.path.join(root, dest)
                if not os.path.exists(full):
                    problems.append("%s:%d: link to %s: no such file" % (rel, number, target))
                    continue
                if anchor:
                    if os.path.isdir(full) or not dest.endswith(".md"):
                        problems.append("%s:%d: link to %s: an anchor into a file that is not "
                                        "Markdown" % (rel, number, target))
                        continue
                    if dest not in cache:
                        cache[dest] = anchors(read_text(full) or "")
                    if anchor not in cache[dest]:
                        problems.append("%s:%d: link to %s: %s has no heading #%s"
                                        % (rel, number, target, dest, anchor))
    return count


def check_references(root, problems):
    count, seen = 0, set()
    for top in REFERENCE_ROOTS:
        if not os.path.exists(os.path.join(root, top)):
            continue
        for rel in walk(root, top):
            if rel in seen:
                continue
            seen.add(rel)
            text = read_text(os.path.join(root, rel))
            if text is None:
                continue
            for m in DOC_REF.finditer(text):
                count += 1
                name, section = m.group(1), m.group(2)
                where = "%s:%d" % (rel, line_of(text, m.start()))
                target = os.path.join(root, "docs", name)
                if not os.path.isfile(target):
                    problems.append("%s: docs/%s does not exist" % (where, name))
                    continue
                if section:
                    section = re.sub(r"\n[ \t]*(?:#+|//+|\*|--)?[ \t]*", " ", section)
                    if not has_section(read_text(target) or "", section):
                        problems.append('%s: docs/%s has no section "%s"' % (where, name, section))
    return count


def check_old_references(root, problems):
    for rel in walk(root, "."):
        rel = os.path.normpath(rel)
        text = read_text(os.path.join(root, rel))
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OLD_DESIGN in line:
                problems.append("%s:%d: cites %s, which is docs/design.md now" % (rel, number, OLD_DESIGN))
            if README_SECTION.search(line):
                problems.append("%s:%d: cites a section of the README; name the docs/ file that "
                                "holds it: %s" % (rel, number, line.strip()[:120]))


def check_readme(root, problems):
    text = read_text(os.path.join(root, "README.md"))
    if text is None:
        problems.append("README.md: missing")
        return
    lines = text.splitlines()
    if len(lines) > MAX_README_LINES:
        problems.append("README.md: %d lines, more than %d" % (len(lines), MAX_README_LINES))
    head = lines[:6]
    ok = (len(head) >= 6 and head[0] == "# execbox" and head[1] == "" and head[2].startswith("```")
          and head[3].startswith("make run ") and head[4].startswith("make test ") and head[5] == "```")
    if not ok:
        problems.append("README.md: does not open with '# execbox' and the fenced block of "
                        "exactly `make run` and `make test`")


def main(argv):
    if len(argv) != 2:
        print("usage: check_docs.py CHECKOUT_ROOT", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    problems = []
    check_readme(root, problems)
    links = check_links(root, problems)
    references = check_references(root, problems)
    check_old_references(root, problems)
    for p in problems:
        print(p)
    if problems:
        print("check_docs: %d problem(s)" % len(problems))
        return 1
    print("check_docs: %d links, %d references checked" % (links, references))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
