"""The notebooks' prose quotes only numbers that their own cells print.

A notebook is re-executed and its outputs stored again; its markdown is not.
This test reads every measured-looking number in a notebook's markdown -- a
decimal (98.96, 5.95e-08), a thousands-separated count (1,651) or a percentage
(62%) -- and looks for it among the numbers of the same notebook's code cells:
what they print (rounded to the prose's precision; a fraction printed as
0.9896 may read 98.96%) and what they set (a quick mode's 2_000 digits). So
a re-run that changes a result cannot leave the old one in the prose.

Not read: inline code, math, link targets and arXiv numbers. Numbers that come
from the papers rather than from a cell are listed in `LITERATURE` with where
they come from; a number in that list is never checked, so keep it short.
"""

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

SABOUR = "Sabour, Frosst & Hinton 2017"

#: Numbers quoted from the literature (or its datasets), with their source.
LITERATURE = {
    "0.0005": f"{SABOUR}, section 4.1: the reconstruction loss's weight",
    "1,152": f"{SABOUR}, section 4: the CapsNet's primary capsules (6 x 6 x 32)",
    "8.2": f"{SABOUR}, section 4: the CapsNet's 8.2M parameters",
    "1,024": f"{SABOUR}, Figure 2: the decoder's second layer",
    "99.75": f"{SABOUR}, Table 1: 0.25% test error on MNIST",
    "99.23": f"{SABOUR}, section 5.2: the CapsNet on expanded MNIST (40x40)",
    "99.22": f"{SABOUR}, section 5.2: the CNN on expanded MNIST (40x40)",
    "60,000": "MNIST: its training set (LeCun et al. 1998)",
    "10,000": "MNIST: its test set (LeCun et al. 1998)",
}

#: A measured-looking number: 1,651 | 98.96 | 5.95e-08 | 62 (before a %).
QUOTED = re.compile(
    r"(?<![\w./])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+(?:e[-+]?\d+)?|\d+(?=\s?%))"
)
#: Any number a cell prints or sets (2_000 and 2000 alike).
PRINTED = re.compile(r"\d+(?:[,_]\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?")
#: Markdown that holds no quoted result: math, inline code, link targets, arXiv.
NOT_PROSE = re.compile(
    r"\$\$.*?\$\$|\$[^$\n]*\$|`[^`]*`|\]\([^)]*\)|https?://\S+|arXiv:\d+\.\d+",
    re.DOTALL,
)


#: What a settings cell sets for quick mode: `TRAIN_DIGITS = 200 if QUICK else 5_000`.
QUICK_SETTING = re.compile(r"=\s*(\d[\d_]*)\s+if\s+QUICK\s+else\b")
#: A count in prose (200, 2,000): not a decimal, a percentage or a duration.
COUNT = re.compile(
    r"(?<![\w.,])\d{1,3}(?:,\d{3})*(?![\w.,]*\d)(?!\s?%)"
    r"(?!\s*(?:s|min|minutes?|seconds?)\b)"
)


def value(text):
    return float(text.replace(",", "").replace("_", ""))


def half_unit(text):
    """Half the last digit's place value: 98.96 -> 0.005; 5.95e-08 -> 5e-11."""
    mantissa, _, exponent = text.replace(",", "").partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


def quoted_numbers(markdown):
    return QUOTED.findall(NOT_PROSE.sub(" ", markdown))


def cell_numbers(notebook):
    """Every number the notebook's code cells print or set."""
    texts = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        texts.append(cell.source)
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            data = output.get("data", {})
            texts += [data.get(kind, "") for kind in ("text/plain", "text/html")]
    return {value(match) for match in PRINTED.findall("\n".join(texts))}


def is_printed(quoted, numbers):
    """Whether a number printed or set rounds to `quoted` (or to it in %)."""
    target, tolerance = value(quoted), half_unit(quoted) * (1 + 1e-9)
    return any(
        abs(candidate - target) <= tolerance
        or abs(100 * candidate - target) <= tolerance
        for candidate in numbers
    )


def unprinted_numbers(notebook):
    """[(markdown cell index, number)] for every quoted number no cell prints."""
    numbers = cell_numbers(notebook)
    return [
        (index, quoted)
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "markdown"
        for quoted in quoted_numbers(cell.source)
        if quoted not in LITERATURE and not is_printed(quoted, numbers)
    ]


def quick_mode_counts(notebook):
    """[(markdown cell index, count)]: counts that a sentence naming quick mode
    quotes and that no quick-mode setting (`N if QUICK else M`) sets.

    Quick mode's outputs are not stored, so the prose guard above cannot see
    its counts; a setting changed without its sentence would go stale.
    """
    quick = {
        value(setting)
        for cell in notebook.cells
        if cell.cell_type == "code"
        for setting in QUICK_SETTING.findall(cell.source)
    }
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue
        named = cell.source.replace("`CAPSULES_KERAS_QUICK=1`", "quick mode")
        text = " ".join(NOT_PROSE.sub(" ", named).split())
        for sentence in re.split(r"(?<=[.;!?])\s|<br>", text):
            if "quick mode" in sentence.lower():
                found += [
                    (index, count)
                    for count in COUNT.findall(sentence)
                    if value(count) not in quick
                ]
    return found


def test_quoted_numbers_are_read_as_written():
    markdown = (
        "reads 98.96% ($\\lambda = 0.5$, `lr=0.001`) of 1,651 digits, "
        "p = 5.95e-08 (87-95%; [arXiv:1710.09829](https://x.org/1.5))"
    )
    assert quoted_numbers(markdown) == ["98.96", "1,651", "5.95e-08", "95"]


def test_a_number_no_cell_prints_is_found():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "print(accuracy)",
            outputs=[nbformat.v4.new_output("stream", text="accuracy 0.98964\n")],
        ),
        nbformat.v4.new_markdown_cell("It reads 98.96% (98.97% before), in 1,651 s."),
    ]
    assert unprinted_numbers(notebook) == [(1, "98.97"), (1, "1,651")]
    notebook.cells[0].source = "QUICK_DIGITS = 1_651"
    assert unprinted_numbers(notebook) == [(1, "98.97")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_prose_quotes_only_printed_numbers(path):
    unprinted = unprinted_numbers(nbformat.read(path, as_version=4))
    assert not unprinted, (
        f"{path.name}: its markdown quotes numbers that no code cell prints or "
        f"sets (markdown cell index, number): {unprinted}. Quote what the "
        "stored outputs print, or print the number in a cell."
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_prose_quotes_quick_mode_counts_as_set(path):
    stale = quick_mode_counts(nbformat.read(path, as_version=4))
    assert not stale, (
        f"{path.name}: a sentence about quick mode quotes counts that no "
        f"`N if QUICK else M` setting sets (markdown cell index, count): {stale}."
    )


def test_a_stale_quick_mode_count_is_found():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("DIGITS = 200 if QUICK else 5_000\nEPOCHS = 2"),
        nbformat.v4.new_markdown_cell(
            "Quick mode (`CAPSULES_KERAS_QUICK=1`: 500 digits, 2 epochs, 95%\n"
            "of them, 47 s) is noise.<br>The full run: 5,000 digits, 2 epochs."
        ),
        nbformat.v4.new_markdown_cell("In quick\nmode, 200 digits."),
    ]
    assert quick_mode_counts(notebook) == [(1, "500"), (1, "2")]


def table_rows(markdown):
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_the_readme_is_short_and_links_the_scoreboard():
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    # A newcomer's five minutes; the claims with their numbers are one link away.
    assert len(readme) <= 8_000, f"README.md has {len(readme):,} characters"
    assert "](notebooks/scoreboard.md)" in readme
    assert table_rows((root / "notebooks" / "scoreboard.md").read_text())
