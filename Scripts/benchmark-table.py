#!/usr/bin/env python3
"""The arithmetic and the writing behind Scripts/benchmark-table (run that, not this).

  python3 Scripts/benchmark-table.py write --new RUN.json... [--old RUN.json...] ...
  python3 Scripts/benchmark-table.py check RUN.json [--results DIR]
  python3 Scripts/benchmark-table.py default-version CHANGELOG.md

`write` reads the JSON files that `ConcordBenchmarks --json` wrote, one per run, and writes
the results JSON, the SVG chart and the Markdown table (into the README between its markers,
or into a file). `check` is CI's: a run that lacks a row of the newest committed results, or
has a row without a finite time, fails. Python 3.8 or later, its standard library only.
"""

import argparse
import datetime
import html
import json
import math
import os
import re
import sys
import textwrap

BEGIN = "<!-- benchmark-table -->"
END = "<!-- /benchmark-table -->"
TARGET = 2.0


def fail(message):
    print(f"benchmark-table: error: {message}", file=sys.stderr)
    sys.exit(1)


def warn(message):
    print(f"benchmark-table: warning: {message}", file=sys.stderr)


def finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# MARK: Reading runs


def load_run(path):
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except (OSError, ValueError) as error:
        fail(f"cannot read the benchmark's JSON {path}: {error}")
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        fail(f"{path} is not the benchmark's JSON (no \"results\" array)")
    return document


def measurement(row):
    """A row of one run as (unit, value, floor, ratio): time in ns, or memory in bytes."""
    if row.get("bytesPerEntity") is not None:
        unit, value, floor = "bytes", row.get("bytesPerEntity"), row.get("baselineBytesPerEntity")
    else:
        unit, value, floor = "ns", row.get("nsPerOp"), row.get("baselineNsPerOp")
    value = value if finite(value) else None
    floor = floor if finite(floor) and floor > 0 else None
    ratio = value / floor if value is not None and floor is not None else None
    return unit, value, floor, ratio


def middle(values):
    """The median of values: the upper of the two middle ones for an even count."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def summarize(name, runs):
    """One row over the runs of one build: the run with the median ratio, medians, spread."""
    measured = []
    unit = "ns"
    for index, document in enumerate(runs):
        for row in document["results"]:
            if row.get("name") == name:
                unit, value, floor, ratio = measurement(row)
                if value is None:
                    fail(f"row {name} has no finite value in run {index + 1}")
                measured.append({"value": value, "floor": floor, "ratio": ratio})
                break
    if not measured:
        return None
    # "Each row is the run with the median ratio" (the README); a row without a floor, the
    # run with the median value.
    key = "ratio" if all(m["ratio"] is not None for m in measured) else "value"
    shown = sorted(measured, key=lambda m: m[key])[len(measured) // 2]

    def over(pick):
        result = {}
        for field in ("value", "floor", "ratio"):
            values = [m[field] for m in measured if m[field] is not None]
            result[field] = pick(values) if values else None
        return result

    return {
        "unit": unit,
        "runs": len(measured),
        "shown": shown,
        "median": over(middle),
        "min": over(min),
        "max": over(max),
        "all": measured,
    }


# MARK: Formatting


def format_time(ns):
    if ns < 1_000:
        return f"{ns:.1f} ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:.2f} µs"
    return f"{ns / 1_000_000:.2f} ms"


def format_value(unit, value, floor=False):
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value:.0f} B/entry" if floor else f"{value:.0f} B/entity"
    return format_time(value)


def format_ratio(ratio):
    return "-" if ratio is None else f"{ratio:.2f}"


def format_range(low, high):
    if low is None or high is None:
        return "-"
    return f"{low:.2f}–{high:.2f}"


def read_labels(path):
    labels = {}
    try:
        with open(path, encoding="utf-8") as file:
            for number, line in enumerate(file, 1):
                line = line.rstrip("\n")
                if not line.strip() or line.startswith("#"):
                    continue
                if "\t" not in line:
                    fail(f"{path}:{number}: expected a name, a tab and a description")
                name, description = line.split("\t", 1)
                labels[name.strip()] = description.strip()
    except OSError as error:
        fail(f"cannot read {path}: {error}")
    return labels


def label(name, labels):
    description = labels.get(name, "")
    return f"`{name}` {description}" if description else f"`{name}`"


def with_commas(number):
    return f"{number:,}"


def caption(meta):
    kind = "`--quick` runs" if meta["quick"] else "default runs"
    runs = meta["runs"]
    text = f"Medians of {runs} {kind}" if runs > 1 else f"One {kind[:-1]}"
    text += f" (N = {with_commas(meta['n'])}"
    if meta["samples"]:
        text += f", {meta['samples']} samples a row"
    text += f") of {meta['commit'][:7]}"
    if meta["dirty"]:
        text += " with uncommitted changes"
    if meta["baseline"]:
        text += f", alternated with runs of {meta['baseline']['commit'][:7]}"
    text += (
        f", written by [`Scripts/benchmark-table`](Scripts/benchmark-table) on {meta['date']}"
        f" ([results]({meta['json_link']})):"
    )
    return text


def markdown(rows, meta):
    baseline = meta["baseline"]
    header = ["benchmark", "median", "floor", "× floor", "× floor, min–max"]
    align = ["---", "---:", "---:", "---:", "---:"]
    if baseline:
        header.append(f"× floor, {baseline['commit'][:7]}")
        align.append("---:")
    wrapped = textwrap.fill(caption(meta), 96, break_long_words=False, break_on_hyphens=False)
    lines = [wrapped, "", "| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for row in rows:
        new = row["new"]
        shown = new["shown"]
        cells = [
            row["label"],
            format_value(new["unit"], shown["value"]),
            format_value(new["unit"], shown["floor"], floor=True),
            format_ratio(shown["ratio"]),
            format_range(new["min"]["ratio"], new["max"]["ratio"]) if new["runs"] > 1 else "-",
        ]
        if baseline:
            old = row.get("old")
            cells.append(format_ratio(old["shown"]["ratio"]) if old else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"![Each row's × floor as a bar]({meta['svg_link']})"]
    return "\n".join(lines) + "\n"


def console(rows, meta):
    """A plain-text comparison for the terminal: ratios with their spread, and the time change."""
    baseline = meta["baseline"]
    width = max(len(row["name"]) for row in rows)
    title = f"{'benchmark':<{width}}  {'× floor':>7}  {'min–max':>11}"
    if baseline:
        title += f"  {'before':>7}  {'min–max':>11}  {'time':>7}"
    lines = [title, "-" * len(title)]
    for row in rows:
        new = row["new"]
        line = (
            f"{row['name']:<{width}}  {format_ratio(new['shown']['ratio']):>7}  "
            f"{format_range(new['min']['ratio'], new['max']['ratio']):>11}"
        )
        old = row.get("old")
        if baseline and old:
            change = "-"
            if old["median"]["value"]:
                percent = round((new["median"]["value"] / old["median"]["value"] - 1) * 100)
                change = f"{percent:+d}%"
            line += (
                f"  {format_ratio(old['shown']['ratio']):>7}  "
                f"{format_range(old['min']['ratio'], old['max']['ratio']):>11}  {change:>7}"
            )
        elif baseline:
            line += f"  {'(new)':>7}"
        lines.append(line)
    if baseline:
        lines.append(
            f"before: {baseline['commit'][:7]}; time: the change of the median time (or bytes)"
        )
    return "\n".join(lines)


# MARK: The chart


def svg(rows, meta):
    """A horizontal bar per row with a floor: its × floor, the runs' spread as a whisker."""
    charted = [row for row in rows if row["new"]["shown"]["ratio"] is not None]
    if not charted:
        fail("no row has a floor: nothing to chart")
    baseline = meta["baseline"]
    row_height, top, bottom = (26 if baseline else 22), 66, 42
    width = 820
    plot_left = max(len(row["name"]) for row in charted) * 7.3 + 20
    plot_right = width - 70
    highest = TARGET
    for row in charted:
        for build in ("new", "old"):
            summary = row.get(build)
            if summary and summary["max"]["ratio"] is not None:
                highest = max(highest, summary["max"]["ratio"])
    limit = math.ceil(highest * 1.02) if highest > TARGET else TARGET + 0.5
    step = 1 if limit <= 10 else 2 if limit <= 20 else 5
    axis_bottom = top + len(charted) * row_height
    height = axis_bottom + bottom

    def x(ratio):
        return plot_left + (plot_right - plot_left) * ratio / limit

    def text(x_, y_, content, size=12, anchor="start", fill="#222", extra=""):
        return (
            f'<text x="{x_:.1f}" y="{y_:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{fill}"{extra}>{html.escape(content)}</text>'
        )

    kind = "--quick runs" if meta["quick"] else "runs"
    subtitle = (
        (f"medians of {meta['runs']} {kind}" if meta["runs"] > 1 else f"one {kind[:-1]}")
        + f", N = {with_commas(meta['n'])}, {meta['commit'][:7]}"
        f"{' with uncommitted changes' if meta['dirty'] else ''}, {meta['date']}"
    )
    legend = "red: above the target (2×); whisker: the runs' min–max"
    if baseline:
        legend += f"; grey: {baseline['commit'][:7]}"
    grid, bars, marks, labels = [], [], [], []
    tick = 0
    while tick <= limit + 1e-9:
        grid.append(
            f'<line x1="{x(tick):.1f}" y1="{top - 4}" x2="{x(tick):.1f}" y2="{axis_bottom}" '
            f'stroke="#e4e4e4" stroke-width="1"/>'
        )
        grid.append(text(x(tick), axis_bottom + 16, f"{tick}×", 11, "middle", "#555"))
        tick += step
    for ratio, dash, colour, name in ((1.0, None, "#222", "floor"), (TARGET, "5 3", "#e45756", "target")):
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        marks.append(
            f'<line x1="{x(ratio):.1f}" y1="{top - 8}" x2="{x(ratio):.1f}" y2="{axis_bottom}" '
            f'stroke="{colour}" stroke-width="1.5"{dashes}/>'
        )
        marks.append(text(x(ratio), axis_bottom + 31, name, 11, "middle", colour))
    halo = ' stroke="#ffffff" stroke-width="3" paint-order="stroke"'
    for index, row in enumerate(charted):
        new = row["new"]
        ratio = new["shown"]["ratio"]
        bar_height = 12 if baseline else 14
        center = top + index * row_height + (row_height - 4) / 2 - (3 if baseline else 0)
        colour = "#4c78a8" if ratio <= TARGET else "#e45756"
        labels.append(text(plot_left - 8, center + 4, row["name"], 12, "end"))
        bars.append(
            f'<rect x="{x(0):.1f}" y="{center - bar_height / 2:.1f}" '
            f'width="{max(x(ratio) - x(0), 1):.1f}" height="{bar_height}" fill="{colour}"/>'
        )
        end = x(ratio)
        old = row.get("old")
        if baseline and old and old["shown"]["ratio"] is not None:
            old_ratio = old["shown"]["ratio"]
            bars.append(
                f'<rect x="{x(0):.1f}" y="{center + bar_height / 2 + 1:.1f}" '
                f'width="{max(x(old_ratio) - x(0), 1):.1f}" height="5" fill="#9a9a9a"/>'
            )
            end = max(end, x(old_ratio))
        if new["runs"] > 1 and new["min"]["ratio"] is not None:
            low, high = x(new["min"]["ratio"]), x(new["max"]["ratio"])
            bars.append(
                f'<path d="M{low:.1f} {center:.1f}H{high:.1f}M{low:.1f} {center - 4:.1f}'
                f'V{center + 4:.1f}M{high:.1f} {center - 4:.1f}V{center + 4:.1f}" '
                f'stroke="#222" stroke-width="1" fill="none"/>'
            )
            end = max(end, high)
        labels.append(text(end + 5, center + 4, f"{ratio:.2f}×", 11, extra=halo))
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace">',
        f"<title>Concord benchmarks: each row's time (or memory) as a multiple of its floor, "
        f"{html.escape(subtitle)}</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        text(12, 22, "Concord benchmarks: × floor per row (lower is better)", 14, extra=' font-weight="bold"'),
        text(12, 40, subtitle, 11, fill="#555"),
        text(12, 55, legend, 11, fill="#555"),
    ]
    out += grid + bars + marks + labels + ["</svg>"]
    return "\n".join(out) + "\n"


# MARK: Versions and results


def version_key(version):
    """`unreleased` is the newest; then semantic versions by their numbers."""
    if version == "unreleased":
        return (1, ())
    numbers = re.match(r"^v?(\d+(?:\.\d+)*)", version)
    if not numbers:
        return (-1, (version,))
    return (0, tuple(int(part) for part in numbers.group(1).split(".")))


def newest_results(directory):
    if not os.path.isdir(directory):
        return None
    versions = [name[: -len(".json")] for name in os.listdir(directory) if name.endswith(".json")]
    if not versions:
        return None
    return os.path.join(directory, max(versions, key=version_key) + ".json")


def default_version(changelog):
    """The top version of the changelog when nothing is listed under Unreleased, else unreleased."""
    try:
        with open(changelog, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError:
        return "unreleased"
    inside = False
    for line in lines:
        heading = re.match(r"^## \[([^\]]+)\]", line)
        if heading:
            if heading.group(1).lower() == "unreleased":
                inside = True
                continue
            return heading.group(1)
        if inside and line.strip() and not line.startswith("#"):
            return "unreleased"
    return "unreleased"


def rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return value


def dumps(value, indent=0):
    """JSON with each innermost object or array on one line, for short diffs."""
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    if not any(isinstance(child, (dict, list)) for child in children):
        return json.dumps(value, ensure_ascii=False)
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(key)}: {dumps(item, indent + 2)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [f"{inner}{dumps(item, indent + 2)}" for item in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def results_document(rows, meta):
    def build(summary):
        return {
            "unit": summary["unit"],
            "runs": summary["runs"],
            "shown": summary["shown"],
            "median": summary["median"],
            "min": summary["min"],
            "max": summary["max"],
            "each": summary["all"],
        }

    document = {
        "version": meta["version"],
        "date": meta["date"],
        "commit": meta["commit"],
        "uncommittedChanges": meta["dirty"],
        "command": meta["command"],
        "n": meta["n"],
        "quick": meta["quick"],
        "samples": meta["samples"],
        "runs": meta["runs"],
        "baseline": meta["baseline"],
        "machine": meta["machine"],
        "about": (
            "Per row, over the runs of each build: shown is the run with the median ratio "
            "(the README's row), median/min/max are taken over the runs field by field, each "
            "lists every run in order. value and floor are nanoseconds per operation, or bytes "
            "for unit bytes; ratio is value / floor; null where a row has no floor."
        ),
        "rows": [],
    }
    for row in rows:
        entry = {"name": row["name"], "label": row["label"]}
        entry.update(build(row["new"]))
        if row.get("old"):
            entry["baseline"] = build(row["old"])
        document["rows"].append(entry)
    return dumps(rounded(document)) + "\n"


def replace_block(readme, block, write=True):
    """The README with its block between the marker lines replaced (written unless write=False)."""
    try:
        with open(readme, encoding="utf-8") as file:
            text = file.read()
    except OSError as error:
        fail(f"cannot read {readme}: {error}")
    pattern = re.compile(rf"^{re.escape(BEGIN)}\n.*?^{re.escape(END)}$", re.MULTILINE | re.DOTALL)
    blocks = pattern.findall(text)
    if len(blocks) != 1:
        fail(f"{readme} needs one block from a line {BEGIN} to a line {END}; it has {len(blocks)}")
    updated = pattern.sub(lambda _: f"{BEGIN}\n{block}{END}", text)
    if write:
        with open(readme, "w", encoding="utf-8") as file:
            file.write(updated)


def write_file(path, content):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        file.write(content)


def command_write(arguments):
    new_runs = [load_run(path) for path in arguments.new]
    old_runs = [load_run(path) for path in arguments.old or []]
    labels = read_labels(arguments.rows)
    names = []
    for document in new_runs:
        for row in document["results"]:
            if row.get("name") not in names:
                names.append(row.get("name"))
    if not names:
        fail("the runs have no rows")
    rows = []
    for name in names:
        if name not in labels:
            warn(f"{arguments.rows} has no description for {name}")
        row = {"name": name, "label": label(name, labels), "new": summarize(name, new_runs)}
        if old_runs:
            row["old"] = summarize(name, old_runs)
        rows.append(row)
    if not arguments.filtered:
        for name in labels:
            if name not in names:
                warn(f"{arguments.rows} describes {name}, which the benchmark no longer runs")
    sizes = {document.get("n") for document in new_runs}
    if len(sizes) != 1:
        fail(f"the runs disagree on N: {sorted(sizes)}")
    version = arguments.version
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", version):
        fail(f"--version {version!r}: use letters, digits, dots, dashes and underscores")
    json_path = os.path.join(arguments.results, f"{version}.json")
    svg_path = os.path.join(arguments.results, f"{version}.svg")
    readme_directory = os.path.dirname(os.path.abspath(arguments.readme or "README.md"))
    meta = {
        "version": version,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "commit": arguments.commit,
        "dirty": arguments.dirty,
        "command": arguments.command,
        "n": sizes.pop(),
        "quick": arguments.quick,
        "samples": arguments.samples,
        "runs": len(new_runs),
        "baseline": (
            {"revision": arguments.baseline_revision, "commit": arguments.baseline_commit}
            if old_runs
            else None
        ),
        "machine": {
            "uname": arguments.uname,
            "nproc": arguments.nproc,
            "cpu": arguments.cpu,
            "swift": arguments.swift,
        },
        "json_link": os.path.relpath(os.path.abspath(json_path), readme_directory),
        "svg_link": os.path.relpath(os.path.abspath(svg_path), readme_directory),
    }
    table = markdown(rows, meta)
    if arguments.readme:
        replace_block(arguments.readme, table, write=False)  # Its markers, before any writing.
    write_file(json_path, results_document(rows, meta))
    write_file(svg_path, svg(rows, meta))
    written = [json_path, svg_path]
    if arguments.table:
        write_file(arguments.table, table)
        written.append(arguments.table)
    if arguments.readme:
        replace_block(arguments.readme, table)
        written.append(arguments.readme)
        # A release's results supersede the unreleased ones, which CI would otherwise read.
        released = [
            name[: -len(".json")]
            for name in os.listdir(arguments.results)
            if name.endswith(".json") and name != "unreleased.json"
        ]
        if version != "unreleased" and version == max(released, key=version_key):
            for extension in ("json", "svg"):
                stale = os.path.join(arguments.results, f"unreleased.{extension}")
                if os.path.exists(stale):
                    os.remove(stale)
                    written.append(f"{stale} (removed: {version} supersedes it)")
    print(table)
    print(console(rows, meta))
    print()
    print("wrote " + ", ".join(written))


def command_check(arguments):
    run = load_run(arguments.run)
    problems = []
    measured = {}
    for row in run["results"]:
        unit, value, floor, _ = measurement(row)
        measured[row.get("name")] = (value, floor)
        if value is None:
            problems.append(f"{row.get('name')}: no finite {'size' if unit == 'bytes' else 'time'}")
    if not measured:
        problems.append("the run has no rows")
    reference = newest_results(arguments.results)
    listed = 0
    if reference:
        try:
            with open(reference, encoding="utf-8") as file:
                committed = json.load(file)
        except (OSError, ValueError) as error:
            fail(f"cannot read {reference}: {error}")
        for row in committed.get("rows", []):
            listed += 1
            name = row.get("name")
            if name not in measured:
                problems.append(f"{name}: listed in {reference}, missing from this run")
            elif row.get("shown", {}).get("floor") is not None and measured[name][1] is None:
                problems.append(f"{name}: {reference} has its floor, this run has none")
    else:
        warn(f"no results in {arguments.results} to compare with; checked this run's rows only")
    if problems:
        for problem in problems:
            print(f"benchmark check: {problem}", file=sys.stderr)
        sys.exit(1)
    print(
        f"benchmark check: {len(measured)} rows measured"
        + (f"; the {listed} rows of {reference} are all there" if reference else "")
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="action", required=True)

    write = commands.add_parser("write")
    write.add_argument("--new", nargs="+", required=True, help="the runs' JSON, this build")
    write.add_argument("--old", nargs="*", help="the runs' JSON, the baseline build")
    write.add_argument("--baseline-revision")
    write.add_argument("--baseline-commit")
    write.add_argument("--rows", required=True, help="the name-to-description file")
    write.add_argument("--results", required=True, help="where <version>.json and .svg go")
    write.add_argument("--readme", help="the README whose block to replace")
    write.add_argument("--table", help="also write the Markdown table to this file")
    write.add_argument("--version", required=True)
    write.add_argument("--commit", required=True)
    write.add_argument("--dirty", action="store_true")
    write.add_argument("--command", default="")
    write.add_argument("--quick", action="store_true")
    write.add_argument("--filtered", action="store_true")
    write.add_argument("--samples", type=int)
    write.add_argument("--uname", default="")
    write.add_argument("--nproc", type=int)
    write.add_argument("--cpu", default="")
    write.add_argument("--swift", default="")

    check = commands.add_parser("check")
    check.add_argument("run", help="a run's JSON, from ConcordBenchmarks --json")
    check.add_argument("--results", default="Benchmarks/results")

    version = commands.add_parser("default-version")
    version.add_argument("changelog")

    arguments = parser.parse_args()
    if arguments.action == "write":
        command_write(arguments)
    elif arguments.action == "check":
        command_check(arguments)
    else:
        print(default_version(arguments.changelog))


if __name__ == "__main__":
    main()
