"""Starts Jupyter Lab on the notebooks as `make lab` does, and checks it serves them.

    python tools/check_lab.py --jupyter .venv/bin/jupyter [-- LAB_ARGS...]

Runs `jupyter lab LAB_ARGS notebooks` headless on a free port (with a token
of its own), then, through the server's REST API, lists the notebooks,
opens a session on the first one, runs `import capsules_keras` in its
kernel and checks that the kernel runs in the project's environment; shuts the server
down in any case. Exits non-zero, saying why, when any step fails (for
example Jupyter's refusal to run as root without `--allow-root`).
"""

import argparse
import json
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from jupyter_client import BlockingKernelClient
from jupyter_core.paths import jupyter_runtime_dir

START_TIMEOUT_S = 60
KERNEL_TIMEOUT_S = 60
PROBE = "import sys, capsules_keras; print(sys.prefix)"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A Jupyter server's REST API at `url` with `token`."""

    def __init__(self, url, token):
        self.url, self.token = url, token

    def request(self, path, method="GET", body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={
                "Authorization": f"token {self.token}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
        return json.loads(text) if text else None


def wait_until_up(server, process):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}")
        try:
            return server.request("/api/status")
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    raise RuntimeError(f"jupyter lab did not answer within {START_TIMEOUT_S} s")


def run_in_kernel(kernel_id, code):
    """stdout of `code` in the running kernel `kernel_id` (its connection file)."""
    client = BlockingKernelClient(
        connection_file=str(Path(jupyter_runtime_dir()) / f"kernel-{kernel_id}.json")
    )
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=KERNEL_TIMEOUT_S)
        output = []
        reply = client.execute_interactive(
            code,
            timeout=KERNEL_TIMEOUT_S,
            output_hook=lambda message: (
                output.append(message["content"]["text"])
                if message["msg_type"] == "stream"
                and message["content"]["name"] == "stdout"
                else None
            ),
        )
    finally:
        client.stop_channels()
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"the kernel failed: {reply['content'].get('evalue')}")
    return "".join(output).strip()


def check(jupyter, lab_args, notebooks):
    port, token = free_port(), secrets.token_hex(16)
    command = [
        jupyter,
        "lab",
        *lab_args,
        "--no-browser",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        str(notebooks),
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    server = Server(f"http://127.0.0.1:{port}", token)
    try:
        try:
            wait_until_up(server, process)
        except RuntimeError as error:
            process.kill()
            log = process.communicate()[0]
            raise RuntimeError(f"{error}; its last words:\n{log[-1500:]}") from None
        listed = sorted(
            item["name"]
            for item in server.request("/api/contents/")["content"]
            # jupytext, when installed, opens the notebooks' .py helpers as
            # notebooks too; the notebooks are the .ipynb files.
            if item["type"] == "notebook" and item["name"].endswith(".ipynb")
        )
        expected = sorted(path.name for path in notebooks.glob("*.ipynb"))
        if listed != expected:
            raise RuntimeError(f"the server lists {listed}, the folder {expected}")
        print(f"listed {len(listed)} notebooks")
        session = server.request(
            "/api/sessions",
            "POST",
            {"path": listed[0], "type": "notebook", "kernel": {"name": "python3"}},
        )
        prefix = run_in_kernel(session["kernel"]["id"], PROBE)
        environment = Path(jupyter).absolute().parent.parent  # .venv/bin/jupyter
        if Path(prefix) != environment:
            raise RuntimeError(
                f"the kernel runs in {prefix}, not in the project's {environment}"
            )
        print(f"{listed[0]}: import capsules_keras in the kernel, in {prefix}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jupyter", required=True, help="the jupyter executable")
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"))
    parser.add_argument("lab_args", nargs="*", help="`make lab`'s arguments")
    args = parser.parse_args(argv)
    try:
        check(args.jupyter, args.lab_args, args.notebooks.resolve())
    except (RuntimeError, urllib.error.URLError, KeyError) as error:
        print(f"lab check failed: {error}", file=sys.stderr)
        return 1
    print("lab check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
