#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Renders the generated parts of docs/benchmarks.md from bench/results/summary.json (standard library only).

    bench/render.py            # rewrite docs/benchmarks.md's generated parts in place
    bench/render.py --check    # exit 1 with a diff when the page differs from what summary.json renders

The page holds two generated parts, each between `<!-- BEGIN GENERATED <name> ... -->` and `<!-- END GENERATED
<name> -->`: `glance` (the GEMM-floor table) and `machines` (the current figures, one section per machine). Everything
outside the markers is written by hand. A table in summary.json either carries its figures ("columns", "rows") or
names a run ("run": a tools/run_benchmarks.sh summary JSON in bench/results/, "section": the heading of one of the
run's tables), whose table is copied from the run's own "table_markdown".
"""
import argparse
import difflib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PARTS = ("glance", "machines")


class RenderError(Exception):
    pass


def markdown_table(columns, rows, where):
    for i, row in enumerate(rows):
        if len(row) != len(columns):
            raise RenderError(f"{where}: row {i} has {len(row)} cells, expected {len(columns)} (columns {columns})")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def run_section(run, section, where):
    """The markdown table under the heading `### <section>` of a run's table_markdown."""
    text = run.get("table_markdown")
    if not isinstance(text, str):
        raise RenderError(f"{where}: the run has no table_markdown")
    lines = text.splitlines()
    try:
        start = lines.index("### " + section)
    except ValueError:
        headings = [line[4:] for line in lines if line.startswith("### ")]
        raise RenderError(f"{where}: the run has no section {section!r}; it has {headings}") from None
    table = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            table.append(line.rstrip())
        elif table:
            break
    if not table:
        raise RenderError(f"{where}: section {section!r} holds no table")
    return "\n".join(table)


def render_glance(glance):
    return glance["text"] + "\n\n" + markdown_table(glance["columns"], glance["rows"], "glance")


def render_machines(summary, results):
    out = []
    for machine in summary["machines"]:
        name = machine["name"]
        out.append(f"### {name}")
        run = None
        if "run" in machine:
            path = results / machine["run"]
            if not path.is_file():
                raise RenderError(f"machine {name!r}: run file {path} does not exist")
            run = json.loads(path.read_text(encoding="utf-8"))
            first = run["table_markdown"].split("\n\n", 1)[0]
            out.append(first + f" Raw medians: [{machine['run']}](../bench/results/{machine['run']}).")
        if "machine" in machine:
            out.append(machine["machine"])
        if "note" in machine:
            out.append(machine["note"])
        for table in machine["tables"]:
            where = f"machine {name!r}, table {table['title']!r}"
            if "run" in table:
                if run is None or table["run"] != machine.get("run"):
                    raise RenderError(f"{where}: a run table must name its machine's run ({machine.get('run')})")
                date, command = run["date"], run["command"]
                body = run_section(run, table["section"], where)
                conditions, note, source = None, table.get("note"), None
            else:
                date, command = table["date"], table["command"]
                body = markdown_table(table["columns"], table["rows"], where) if "columns" in table else None
                conditions, note, source = table.get("conditions"), table.get("note"), table.get("source")
            out.append(f"#### {table['title']} — {date}")
            if conditions:
                out.append(conditions[0].upper() + conditions[1:] + ".")
            out.append("```sh\n" + command + "\n```")
            if body:
                out.append(body)
            if note:
                out.append(note)
            if source:
                out.append(f"Measured and discussed in [the benchmark notebook]({source}).")
    return "\n\n".join(out)


def render_page(page, summary, results):
    rendered = {"glance": render_glance(summary["glance"]), "machines": render_machines(summary, results)}
    for part in PARTS:
        pattern = re.compile(r"(<!-- BEGIN GENERATED %s\b[^>]*-->\n)(.*?)(<!-- END GENERATED %s -->)" % (part, part),
                             re.S)
        if len(pattern.findall(page)) != 1:
            raise RenderError(f"the page must hold exactly one generated part {part!r} "
                              f"(<!-- BEGIN GENERATED {part} ... --> ... <!-- END GENERATED {part} -->)")
        page = pattern.sub(lambda m, part=part: m.group(1) + "\n" + rendered[part] + "\n\n" + m.group(3), page)
    return page


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff when the page is not up to date")
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="the repository root (default: this checkout)")
    parser.add_argument("--page", type=pathlib.Path, help="the page (default: <root>/docs/benchmarks.md)")
    args = parser.parse_args(argv)
    results = args.root / "bench" / "results"
    page_path = args.page or args.root / "docs" / "benchmarks.md"
    try:
        summary = json.loads((results / "summary.json").read_text(encoding="utf-8"))
        page = page_path.read_text(encoding="utf-8")
        new = render_page(page, summary, results)
    except (OSError, ValueError, KeyError, RenderError) as e:
        print(f"render.py: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new != page:
            sys.stdout.writelines(difflib.unified_diff(page.splitlines(True), new.splitlines(True),
                                                       str(page_path), "rendered from bench/results/summary.json"))
            print(f"{page_path} is not what bench/render.py renders from summary.json: run bench/render.py",
                  file=sys.stderr)
            return 1
        print(f"{page_path}: generated parts match bench/results/summary.json")
        return 0
    if new != page:
        page_path.write_text(new, encoding="utf-8")
        print(f"rewrote the generated parts of {page_path}")
    else:
        print(f"{page_path} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
