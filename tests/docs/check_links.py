#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks that the relative links and anchors of the repository's Markdown files resolve (standard library only).

    tests/docs/check_links.py [ROOT]     # ROOT: the repository root (default: this checkout)

Every Markdown file that git tracks or would track (`git ls-files --cached --others --exclude-standard`; without git,
every *.md outside build*/, dot-folders and the like) is read; links inside fenced code blocks and inline code are
skipped. A link `[text](target)`, a reference definition `[id]: target` and an HTML `href="…"`/`src="…"` are checked
unless the target has a scheme (https:, mailto:, ...): the file or folder must exist inside ROOT, and an anchor
`#name` into a Markdown file (or into the same file) must be one of its headings' GitHub anchors (lower case,
punctuation dropped, spaces to hyphens, -1, -2, ... for repeats) or an explicit `id=`/`name=`. Prints every broken
link as `file:line: ...` and exits 1 if there is one. A self-test of the checker runs first.
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_ATTR = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ID = re.compile(r"""<[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
SKIP_DIRS = {".git", "node_modules", "__pycache__", "out"}


def github_slug(text):
    """GitHub's heading anchor: markup dropped, lower case, only letters, digits, _, - and spaces, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [text](url) -> text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("*", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def code_free_lines(text):
    """(line number, line without inline code, line) for every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield number, INLINE_CODE.sub("", line), line


def anchors_of(path, cache):
    if path not in cache:
        seen, anchors = {}, set()
        for _, text, line in code_free_lines(path.read_text(encoding="utf-8")):
            anchors.update(EXPLICIT_ID.findall(text))
            m = HEADING.match(line)  # a heading's code spans count: `saved=` gives "saved"
            if m:
                slug = github_slug(m.group(2))
                count = seen.get(slug, 0)
                seen[slug] = count + 1
                anchors.add(slug if count == 0 else f"{slug}-{count}")
        cache[path] = anchors
    return cache[path]


def markdown_files(root):
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                              "--", "*.md"], check=True, capture_output=True).stdout.decode()
        return sorted(root / p for p in out.split("\0") if p and (root / p).is_file())
    except (OSError, subprocess.CalledProcessError):
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith((".", "build"))]
            files += [pathlib.Path(folder) / n for n in names if n.endswith(".md")]
        return sorted(files)


def check(root):
    root = root.resolve()
    cache, problems = {}, []
    for md in markdown_files(root):
        rel = md.relative_to(root)
        for number, line, _ in code_free_lines(md.read_text(encoding="utf-8")):
            targets = LINK.findall(line) + HTML_ATTR.findall(line)
            m = REF_DEF.match(line)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if SCHEME.match(target):
                    continue
                path_part, _, anchor = target.partition("#")
                path_part = re.sub(r"%20", " ", path_part)
                if path_part.startswith("/"):
                    dest = (root / path_part.lstrip("/")).resolve()
                else:
                    dest = (md.parent / path_part).resolve() if path_part else md
                where = f"{rel}:{number}: link {target!r}"
                if root != dest and root not in dest.parents:
                    problems.append(f"{where} leaves the repository")
                elif not dest.exists():
                    problems.append(f"{where}: {dest.relative_to(root)} does not exist")
                elif anchor and dest.suffix == ".md":
                    anchors = anchors_of(dest, cache)
                    if anchor not in anchors:
                        close = sorted(a for a in anchors if a[:6] == anchor[:6])[:5]
                        problems.append(f"{where}: no anchor #{anchor} in {dest.relative_to(root)}"
                                        + (f" (similar: {', '.join(close)})" if close else ""))
    return problems


def self_test():
    assert github_slug("Issue 20's last targets: the SRHT (AVX-512, 2026-12-02)") == \
        "issue-20s-last-targets-the-srht-avx-512-2026-12-02"
    assert github_slug("Gaussian at B = 256, and `x` ÷ P") == "gaussian-at-b--256-and-x--p"
    assert github_slug("[The link](x.md) and **bold** Ĝ") == "the-link-and-bold-ĝ"
    assert github_slug("Saving more (`saved=`)") == "saving-more-saved"
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "docs").mkdir()
        (root / "docs" / "a.md").write_text("# A\n\n## Twice\n\n## Twice\n\n[ok](b.md#b-title) [ok](#twice-1)\n"
                                            "[bad file](c.md) [bad anchor](b.md#nope) `[code](c.md)`\n"
                                            "```\n[fenced](c.md)\n```\n[web](https://example.com/x#y)\n",
                                            encoding="utf-8")
        (root / "docs" / "b.md").write_text("# B `title`\n\n[up](../docs/a.md#a) [out](../../x.md)\n", encoding="utf-8")
        problems = check(root)
        assert len(problems) == 3, problems
        assert "c.md does not exist" in problems[0] and "no anchor #nope" in problems[1], problems
        assert "leaves the repository" in problems[2], problems


def main(argv):
    self_test()
    root = pathlib.Path(argv[1]) if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    problems = check(root)
    for p in problems:
        print(p, flush=True)
    count = len(markdown_files(root.resolve()))
    if problems:
        print(f"{len(problems)} broken link(s) in {count} Markdown files", file=sys.stderr)
        return 1
    print(f"every relative link and anchor of {count} Markdown files resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
