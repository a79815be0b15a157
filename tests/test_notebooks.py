"""The notebooks in notebooks/: stored outputs, and the package, not a copy of it.

nbval (`make test`) re-executes every notebook and compares the outputs it
checks with the stored ones. These tests cover what nbval does not:

- every notebook was executed top to bottom in one kernel and its outputs
  stored (figures as PNG), so it reads well on a code host;
- no notebook re-implements the package: no capsule layer or loss of its own,
  no squash/routing/margin function, no routing loop. An `einsum` is allowed
  only in a cell marked `# explanatory check: ...` that asserts its results
  against the package's outputs (notebook 01 writes the routing equations out
  that way to show that math and code agree).

These rules are a tripwire for a pasted re-implementation, not a proof: code
review still reads the notebooks.

`python tests/test_notebooks.py` prints how many cells nbval checks and ignores
in each notebook.
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import find_comment_markers, find_metadata_tags

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))

#: Marks a cell whose `einsum`s only explain and check the package's outputs.
CHECK_MARKER = "# explanatory check:"

#: Names a notebook must not give its own functions or classes.
PACKAGE_NAMES = re.compile(
    r"squash|rout|margin|coupl|agree|safe_norm|digit_?caps|primary_?caps",
    re.IGNORECASE,
)

#: Base classes a notebook must not subclass: capsule layers and losses belong
#: in the package. (Subclassing `keras.Model` around them is the point of 04.)
FORBIDDEN_BASES = ("Layer", "Loss")


def read(path):
    return nbformat.read(path, as_version=4)


def code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def nbval_options(cell):
    """nbval's own reading of a cell's markers: {'check': False, 'skip': True}."""
    options = dict(find_metadata_tags(cell.metadata))
    options.update(find_comment_markers(cell.source))
    return options


def nbval_cell_counts(path):
    """How nbval treats the code cells of one notebook.

    Returns:
        A dict: `checked` (outputs compared with the stored ones; of which
        `checked_with_output` have any), `ignored` (`NBVAL_IGNORE_OUTPUT`: run,
        outputs not compared) and `skipped` (`NBVAL_SKIP`: not run).
    """
    counts = {"checked": 0, "checked_with_output": 0, "ignored": 0, "skipped": 0}
    for cell in code_cells(read(path)):
        if not cell.source.strip():
            continue
        options = nbval_options(cell)
        if options.get("skip"):
            counts["skipped"] += 1
        elif options.get("check", True) is False:
            counts["ignored"] += 1
        else:
            counts["checked"] += 1
            counts["checked_with_output"] += bool(cell.outputs)
    return counts


def python_source(cell):
    """The cell as Python: IPython magics and shell lines commented out."""
    return "\n".join(
        "# " + line if line.lstrip().startswith(("%", "!")) else line
        for line in cell.source.splitlines()
    )


def _name(node):
    """`keras.layers.Layer` -> 'Layer'; `Layer` -> 'Layer'."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _calls(tree, name):
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _name(node.func) == name
    ]


_LOOPS = (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def reimplementation_problems(source):
    """What in one code cell looks like re-implementing the package.

    Args:
        source: The cell's Python source (magics already removed).

    Returns:
        A list of human-readable problems; empty if the cell is fine.
    """
    tree = ast.parse(source)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [_name(base) for base in node.bases]
            if any(base.endswith(FORBIDDEN_BASES) for base in bases):
                problems.append(f"class {node.name} subclasses {bases}")
            if PACKAGE_NAMES.search(node.name) and "Model" not in bases:
                problems.append(f"class {node.name} duplicates a package name")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if PACKAGE_NAMES.search(node.name):
                problems.append(f"def {node.name} duplicates a package function")
            if _calls(node, "softmax"):
                problems.append(f"def {node.name} computes a softmax (routing?)")
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            names = [_name(target) for target in node.targets]
            if any(PACKAGE_NAMES.search(name) for name in names):
                problems.append(f"lambda {names} duplicates a package function")
        if isinstance(node, _LOOPS) and _calls(node, "softmax"):
            problems.append("a loop computes a softmax: a routing loop")
    einsums = _calls(tree, "einsum")
    if einsums and CHECK_MARKER not in source:
        problems.append(f"einsum outside a cell marked {CHECK_MARKER!r}")
    if CHECK_MARKER in source and not any(
        isinstance(node, ast.Assert) for node in ast.walk(tree)
    ):
        problems.append(f"a cell marked {CHECK_MARKER!r} asserts nothing")
    return problems


def _figure_without_png(output):
    data = output.get("data", {})
    text = data.get("text/plain", "")
    return text.startswith("<Figure") and "image/png" not in data


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_outputs_are_stored(path):
    cells = [cell for cell in code_cells(read(path)) if cell.source.strip()]
    counts = [cell.execution_count for cell in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{path.name}: execute the notebook top to bottom in a fresh kernel and "
        f"store its outputs. Received execution counts {counts}"
    )
    assert any(cell.outputs for cell in cells), f"{path.name} stores no outputs"
    for number, cell in enumerate(cells, start=1):
        where = f"{path.name}, code cell {number}"
        tree = ast.parse(python_source(cell))
        talks = _calls(tree, "print") or _calls(tree, "display")
        if talks and not nbval_options(cell).get("skip"):
            assert cell.outputs, f"{where} prints or displays, but stores no output"
        for output in cell.outputs:
            assert output.output_type != "error", f"{where} stores an error"
            assert output.get("name") != "stderr", (
                f"{where} stores stderr (a warning or a library's log): "
                f"{output.text[:200]!r}"
            )
            assert not _figure_without_png(output), (
                f"{where} stores a figure without its PNG (run `%matplotlib "
                "inline` before displaying Figures built without pyplot)"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_headings_have_no_inline_code(path):
    """The docs site's table of contents drops inline code from a heading."""
    headings = [
        line
        for cell in read(path).cells
        if cell.cell_type == "markdown"
        for line in re.sub(r"```.*?```", "", cell.source, flags=re.DOTALL).splitlines()
        if line.startswith("#") and "`" in line
    ]
    assert not headings, (
        f"{path.name}: write these headings without backticks: {headings}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_uses_the_package(path):
    cells = code_cells(read(path))
    sources = [python_source(cell) for cell in cells]
    assert any(
        re.search(r"^\s*(import|from) capsules_keras\b", source, re.MULTILINE)
        for source in sources
    ), f"{path.name} does not import capsules_keras"
    problems = [
        f"code cell {number}: {problem}"
        for number, source in enumerate(sources, start=1)
        for problem in reimplementation_problems(source)
    ]
    assert not problems, f"{path.name} re-implements the package: {problems}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_first_cell_picks_the_backend(path):
    first = next(cell for cell in code_cells(read(path)) if cell.source.strip())
    source = first.source
    assert 'os.environ.setdefault("KERAS_BACKEND"' in source, path.name
    assert source.index("KERAS_BACKEND") < source.index("import keras"), path.name
    # Its output names the backend, which differs from run to run.
    assert nbval_options(first).get("check", True) is False, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_nbval_checks_cells(path):
    counts = nbval_cell_counts(path)
    print(f"{path.name}: {counts}")
    assert counts["checked_with_output"] >= 1, (
        f"nbval compares no output of {path.name}: {counts}"
    )


ROUTING_LOOP = """
for r in range(3):
    c = ops.softmax(b, axis=-1)
    s = ops.einsum("bij,bijm->bjm", c, u_hat)
"""


@pytest.mark.parametrize(
    "source",
    [
        "class MyCaps(keras.layers.Layer):\n    pass",
        "class Margin(keras.losses.Loss):\n    pass",
        "def squash(s):\n    return s",
        "def my_dynamic_routing(u_hat):\n    return u_hat",
        "def step(b):\n    return ops.softmax(b, -1)",
        "squash = lambda s: s",
        ROUTING_LOOP,
        "c = [ops.softmax(b, -1) for b in logits]",
        'u_hat = ops.einsum("ijnm,bin->bijm", W, u)',
        '# explanatory check: no assert\nv = ops.einsum("bij,bijm->bjm", c, u)',
    ],
)
def test_reimplementations_are_caught(source):
    assert reimplementation_problems(source)


@pytest.mark.parametrize(
    "source",
    [
        "class SmallCapsNet(keras.Model):\n    pass",
        "v, c = dynamic_routing(u_hat, iterations=3, return_coupling=True)",
        "wrong = ops.softmax(b, axis=1)",
        '# explanatory check: the shapes\nu_hat = ops.einsum("ijnm,bin->bijm", W, u)'
        "\nassert np.allclose(u_hat, layer.votes(u))",
        "def downsample(images):\n    return images[:, ::2, ::2]",
    ],
)
def test_package_use_is_accepted(source):
    assert reimplementation_problems(source) == []


if __name__ == "__main__":
    for notebook in NOTEBOOKS:
        counts = nbval_cell_counts(notebook)
        print(
            f"{notebook.name}: nbval checks {counts['checked']} code cells "
            f"({counts['checked_with_output']} with output), ignores "
            f"{counts['ignored']}, skips {counts['skipped']}"
        )
