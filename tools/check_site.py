"""Opens the built site in headless Chromium as a reader would.

    python tools/check_site.py site --browser /usr/bin/chromium --screenshots site-check

Serves the site on a free local port, opens the home page, two notebook
pages (one with a widget's still) and an API page, saves a screenshot of
each, and exits non-zero when a page has a JavaScript error, a console error
or a failed request, an image that did not load (`naturalWidth == 0`), no
title or no heading, or (on the notebook pages) equations that MathJax did
not typeset or cell tags (the test suite's nbval markers) shown above the
code.
"""

import argparse
import functools
import http.server
import sys
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

#: name: (path in the site, whether its equations must be typeset)
PAGES = {
    "home": ("", False),
    "notebook": ("tutorial/01_squash_and_routing/", True),
    # Its capsule explorer is a widget: the page shows its still instead.
    "widgets": ("tutorial/09_explore_by_hand/", True),
    "api": ("api/layers/", False),
}
SITE_TITLE = "capsules_keras"
MATH_TIMEOUT_MS = 30_000

BROKEN_IMAGES = """() => Array.from(document.images)
    .filter(image => !image.complete || image.naturalWidth === 0)
    .map(image => image.src.slice(0, 80))"""
MATH_DONE = """() => window.MathJax && MathJax.Hub && MathJax.Hub.queue
    && MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0"""
VISIBLE_CELL_TAGS = """() => Array.from(document.querySelectorAll(".cell-tag"))
    .filter(tag => tag.offsetParent !== null).map(tag => tag.textContent)"""
TYPESET = """() => ({
    typeset: document.querySelectorAll(".MathJax_CHTML").length,
    errors: document.querySelectorAll(".MathJax_Error, .mjx-merror").length,
})"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(site):
    """A local HTTP server of `site` on a free port, in a daemon thread."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def check_page(browser, url, needs_math, screenshot):
    """The problems a reader would see on the page at `url`."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = []
    page.on("pageerror", lambda error: problems.append(f"JavaScript error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console error: {message.text}")
            if message.type == "error"
            else None
        ),
    )
    page.on(
        "requestfailed",
        lambda request: problems.append(f"request failed: {request.url[:100]}"),
    )
    response = page.goto(url, wait_until="networkidle")
    if response is None or response.status != 200:
        problems.append(f"HTTP status {response and response.status}")
    if SITE_TITLE not in page.title():
        problems.append(f"title {page.title()!r} does not name {SITE_TITLE}")
    if not page.locator("h1").first.inner_text().strip():
        problems.append("no heading")
    if needs_math:
        try:
            page.wait_for_function(MATH_DONE, timeout=MATH_TIMEOUT_MS)
        except Exception:  # noqa: BLE001 -- reported as the problem it is
            problems.append("MathJax did not finish typesetting")
        math = page.evaluate(TYPESET)
        if math["typeset"] == 0 or math["errors"]:
            problems.append(f"equations not typeset: {math}")
    tags = page.evaluate(VISIBLE_CELL_TAGS)
    if tags:
        problems.append(f"cell tags shown to the reader: {sorted(set(tags))}")
    broken = page.evaluate(BROKEN_IMAGES)
    if broken:
        problems.append(f"images that did not load: {broken}")
    images = page.evaluate("() => document.images.length")
    page.screenshot(path=str(screenshot))
    page.close()
    return problems, images


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="the built site (make docs: site/)")
    parser.add_argument("--browser", required=True, help="Chromium's executable")
    parser.add_argument("--screenshots", type=Path, default=Path("site-check"))
    args = parser.parse_args(argv)
    if not (args.site / "index.html").exists():
        parser.error(f"no index.html in {args.site}: build the site first")
    args.screenshots.mkdir(parents=True, exist_ok=True)
    server = serve(args.site)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    failed = False
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.browser)
        for name, (path, needs_math) in PAGES.items():
            screenshot = args.screenshots / f"{name}.png"
            problems, images = check_page(browser, base + path, needs_math, screenshot)
            status = "FAIL" if problems else "ok"
            print(f"{status:4} {name:9} /{path} ({images} images) -> {screenshot}")
            for problem in problems:
                print(f"     {problem}")
            failed |= bool(problems)
        browser.close()
    server.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
