"""Where `make test`'s time goes: a log's pytest durations as Markdown tables.

Run the suites with every duration printed, keep the log, and summarise it:

    make test TEST_DURATIONS=0 2>&1 | tee test.log
    python tools/slowest_tests.py test.log --top 25 > durations.md

For each part of a backend's suite (the Makefile's `=== tests:
KERAS_BACKEND=jax (units) ===` headers; a whole suite's, without the part, in
older logs): its closing line, the seconds per file (each notebook is one file,
its cells the items) and the slowest items, setup, call and teardown added.
The runs measured with it so far: docs/past-investigations.md.
"""

import argparse
import collections
import re

SUITE = re.compile(r"^=== tests: KERAS_BACKEND=(\w+(?: \(\w+\))?) ===$", re.MULTILINE)
DURATION = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(\S.*?)\s*$", re.MULTILINE)
CLOSING = re.compile(r"^=+ (.+ in [\d.]+s.*?) =+$", re.MULTILINE)


def suites(log):
    """{suite: (closing line, {item: seconds})} for every suite in `log`.

    A suite is named as its header names it: "jax (units)", or "jax".
    """
    parts = SUITE.split(log)
    found = {}
    for backend, body in zip(parts[1::2], parts[2::2], strict=True):
        items = collections.Counter()
        for seconds, item in DURATION.findall(body):
            items[item] += float(seconds)
        closing = CLOSING.findall(body)
        found[backend] = (closing[-1] if closing else "no closing line", items)
    return found


def table(header, rows):
    lines = [f"| {header} | s |", "|---|---|"]
    lines += [f"| `{name}` | {seconds:.1f} |" for name, seconds in rows]
    return "\n".join(lines)


def summary(log, top=25):
    """The Markdown summary of one `make test` log."""
    sections = []
    for backend, (closing, items) in suites(log).items():
        files = collections.Counter()
        for item, seconds in items.items():
            files[item.split("::")[0]] += seconds
        sections.append(
            f"### {backend}: {closing}\n\n"
            f"Sum of the items: {sum(items.values()):.0f} s.\n\n"
            + table("file", files.most_common())
            + "\n\n"
            + table(f"slowest {top}", items.most_common(top))
        )
    return "\n\n".join(sections) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="output of `make test TEST_DURATIONS=0`")
    parser.add_argument("--top", type=int, default=25, help="slowest items listed")
    args = parser.parse_args(argv)
    with open(args.log, encoding="utf-8") as f:
        print(summary(f.read(), args.top), end="")


if __name__ == "__main__":
    main()
