"""The package's layout: its imports point one way (ARCHITECTURE.md).

ops -> routing -> layers -> losses -> models -> data / plots / capacity ->
training -> the command-line interfaces (`predict` before `export`, which
loads models as `predict` does). A module may import from its own part and
from the parts before it, never from a later one; nothing imports the
training CLI modules (`train`, `evaluate`), not the notebooks nor the
benchmarks.
"""

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "capsules_keras"

#: Each part of the package and its place in the dependency order.
ORDER = {
    "_startup": 0,
    "_checks": 0,
    "ops": 1,
    "inputs": 1,
    "metrics": 1,
    "diagnostics": 1,
    "distribution": 1,
    "routing": 2,
    "layers": 3,
    "losses": 4,
    "models": 5,
    "data": 6,
    "plots": 6,
    "capacity": 6,
    "training": 7,
    "train": 8,
    "evaluate": 8,
    "predict": 8,
    "export": 9,
    "__init__": 9,
}
CLI = ("train", "evaluate")


def part(module):
    """`routing` for `capsules_keras.routing.dynamic`, ... (None: not ours).

    The package itself (`from capsules_keras import X`) is its `__init__`:
    the public API, which imports every part.
    """
    names = module.split(".")
    if names[0] != "capsules_keras":
        return None
    if len(names) == 1 or names[1] not in ORDER:
        return "__init__"
    return names[1]


def imported_modules(source):
    """Every module `source` imports (`from X import y` gives `X.y`)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def package_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).with_suffix("")
        yield relative.parts[0], path


def test_every_module_has_a_place_in_the_order():
    assert {name for name, _ in package_modules()} <= set(ORDER)


@pytest.mark.parametrize(
    "name, path", list(package_modules()), ids=lambda value: str(value)
)
def test_imports_point_one_way(name, path):
    later = {
        module
        for module in imported_modules(path.read_text())
        if part(module) in ORDER and ORDER[part(module)] > ORDER[name]
    }
    assert not later, f"{path.relative_to(ROOT)} imports a later part: {later}"


def notebook_and_benchmark_sources():
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        yield path, path.read_text()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for cell in cells:
            if cell["cell_type"] == "code":
                # IPython's magics and shell lines are not Python.
                lines = "".join(cell["source"]).splitlines()
                python = [line for line in lines if not line.startswith(("%", "!"))]
                yield path, "\n".join(python)


def test_notebooks_and_benchmarks_import_the_library_not_the_cli():
    sources = list(notebook_and_benchmark_sources())
    assert any(path.suffix == ".ipynb" for path, _ in sources)
    for path, source in sources:
        cli = [m for m in imported_modules(source) if part(m) in CLI]
        assert not cli, f"{path.relative_to(ROOT)} imports the CLI: {cli}"
