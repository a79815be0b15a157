"""Starts Jupyter Lab on the notebooks as `make lab` does, and checks it serves them.

    python tools/check_lab.py --jupyter .venv/bin/jupyter \
        [--browser /usr/bin/chromium --screenshot lab-check/explorer.png] \
        [-- LAB_ARGS...]

Runs `jupyter lab LAB_ARGS notebooks` headless on a free port (with a token
of its own), then, through the server's REST API, lists the notebooks,
opens a session on the first one, runs `import capsules_keras` in its
kernel and checks that the kernel runs in the project's environment. With
`--browser`, it then does what a reader of notebook 09 does, in headless
Chromium: opens the notebook in JupyterLab, runs all its cells, moves a
slider of the capsule explorer with the keyboard and checks that the
redrawing changes (a screenshot shows the result). It shuts the server down
in any case, and exits non-zero, saying why, when any step fails (for
example Jupyter's refusal to run as root without `--allow-root`).
"""

import argparse
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from jupyter_client import BlockingKernelClient
from jupyter_core.paths import jupyter_runtime_dir

START_TIMEOUT_S = 60
KERNEL_TIMEOUT_S = 60
PROBE = "import sys, capsules_keras; print(sys.prefix)"
#: The notebook whose widgets the browser moves, and how long its cells may take.
EXPLORER_NOTEBOOK = "09_explore_by_hand.ipynb"
RUN_ALL_TIMEOUT_MS = 120_000
REDRAW_TIMEOUT_MS = 60_000
#: JupyterLab settings of the check's own: no autosave, so that the notebook run
#: in the browser is never written back over the stored one; no news prompt.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false"
    },
}


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


def move_a_slider(url, token, browser, screenshot):
    """Runs notebook 09 in JupyterLab and moves a slider of its explorer.

    Returns what the reader would see: the picture's source before and after
    the slider moved (an ipywidgets Image is a blob URL, a new one for every
    new picture).
    """
    from playwright.sync_api import Error, sync_playwright  # the docs extra's

    try:
        return _move_a_slider(url, token, browser, screenshot, sync_playwright)
    except Error as error:  # a timeout among them: say which step
        raise RuntimeError(f"{EXPLORER_NOTEBOOK} in the browser: {error}") from None


def _move_a_slider(url, token, browser, screenshot, sync_playwright):
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=browser)
        page = chromium.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{url}/lab/tree/{EXPLORER_NOTEBOOK}?token={token}")
            page.locator(".jp-Notebook").first.wait_for(timeout=START_TIMEOUT_S * 1000)
            # Cells run before the kernel is ready can be dropped: wait for it.
            page.get_by_text(re.compile(r"\| Idle$")).first.wait_for(
                timeout=KERNEL_TIMEOUT_S * 1000
            )
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            # JupyterLab skips drawing the cells out of view: wait for the
            # picture to exist, then bring it into view.
            picture = page.locator(".widget-image").first
            picture.wait_for(state="attached", timeout=RUN_ALL_TIMEOUT_MS)
            picture.scroll_into_view_if_needed()
            before = picture.get_attribute("src")
            handle = page.locator(".widget-slider .noUi-handle").first
            handle.scroll_into_view_if_needed()
            handle.focus()
            for _ in range(4):  # +0.05 a press: dimension 0 to +0.20
                handle.press("ArrowRight")
            page.wait_for_function(
                "before => document.querySelector('.widget-image').src !== before",
                arg=before,
                timeout=REDRAW_TIMEOUT_MS,
            )
            return before, picture.get_attribute("src")
        finally:  # what the page showed, whether or not the check passed
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot))
            chromium.close()


def check(jupyter, lab_args, notebooks, browser=None, screenshot=None):
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
    settings = tempfile.TemporaryDirectory()
    for name, values in LAB_SETTINGS.items():
        path = Path(settings.name, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "JUPYTERLAB_SETTINGS_DIR": settings.name},
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
        if browser is not None:
            before, after = move_a_slider(server.url, token, browser, screenshot)
            print(
                f"{EXPLORER_NOTEBOOK}: run in JupyterLab; a slider moved, the "
                f"redrawing changed ({before[:30]}... -> {after[:30]}...)"
            )
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        settings.cleanup()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jupyter", required=True, help="the jupyter executable")
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"))
    parser.add_argument(
        "--browser", help="Chromium's executable: also move notebook 09's sliders"
    )
    parser.add_argument("--screenshot", type=Path, help="where to save that page")
    parser.add_argument("lab_args", nargs="*", help="`make lab`'s arguments")
    args = parser.parse_args(argv)
    try:
        check(
            args.jupyter,
            args.lab_args,
            args.notebooks.resolve(),
            args.browser,
            args.screenshot,
        )
    except (RuntimeError, urllib.error.URLError, KeyError) as error:
        print(f"lab check failed: {error}", file=sys.stderr)
        return 1
    print("lab check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
