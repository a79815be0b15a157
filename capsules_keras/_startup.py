"""Imports Keras (and tensorflow), keeping tensorflow's start-up information
off stderr.

On the tensorflow backend, `import keras` imports tensorflow, whose C++ core
writes information lines to stderr before its logging is configured (so
`TF_CPP_MIN_LOG_LEVEL` cannot hide them): that oneDNN is on, that there is no
CUDA driver, which CPU instructions it was not built for. They would open
every command's output, `--help` included, and every notebook. This module,
imported first by the package, imports Keras with stderr held in a file,
then writes back every line but those information records (warnings,
errors and Python's own lines pass). Where
`TF_CPP_MIN_LOG_LEVEL=0` asks for information, or Keras is already imported,
nothing is held back. On the other backends tensorflow starts later, where
it is installed: `keras.utils.set_random_seed` imports it to seed it too,
and the trainer seeds inside `information_held()`.
"""

import contextlib
import os
import re
import sys
import tempfile

#: An information record of tensorflow's C++ log: "I", then the date.
INFORMATION = re.compile(r"^I\d{4} ")
#: The lines that come with information records only: absl's before its
#: logging is set up, and the second line of the CPU-instructions record.
COMPANIONS = (
    "WARNING: All log messages before absl::InitializeLog()",
    "To enable the following instructions:",
)


def without_information(text):
    """`text` without tensorflow's information records and their companion
    lines; everything else (warnings, errors, Python's own) stays."""
    return "".join(
        line
        for line in text.splitlines(keepends=True)
        if not INFORMATION.match(line) and not line.startswith(COMPANIONS)
    )


@contextlib.contextmanager
def information_held():
    """Holds stderr in a file while the block runs, then writes it back
    without tensorflow's information records (see above); where
    `TF_CPP_MIN_LOG_LEVEL=0` asks for them, or tensorflow has started
    already, it holds nothing back."""
    quiet = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1") != "0"
    if not quiet or "tensorflow" in sys.modules:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            sys.stderr.write(without_information(held.read()))
            sys.stderr.flush()


def import_keras():
    """`import keras`, its start-up information held back (see above)."""
    if "keras" in sys.modules:
        return
    with information_held():
        import keras  # noqa: F401


import_keras()
