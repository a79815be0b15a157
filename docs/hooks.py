"""MkDocs hooks: the changelog, links into the repository, MathJax, widgets.

A widget output (notebook 09's capsule explorer) cannot run on a static
page: where its display data holds a still PNG too, the page shows that.
The notebooks stay in `notebooks/` (nbval executes them there); the site
reads them through the link `docs/tutorial` and mkdocs-jupyter renders them
from their stored outputs. `CHANGELOG.md` becomes `changelog.md`. Links to
repository files outside docs/ point to the repository. MathJax 2 (the
version nbconvert's notebook template configures), fetched once by
`make docs` into `.docs-cache/`, is copied into the site, so the pages
typeset their equations without a network.
"""

import json
import posixpath
import re
import shutil
from pathlib import Path

from markdown.extensions.toc import slugify
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
MATHJAX = ROOT / ".docs-cache" / "mathjax"
#: What the notebook pages load of MathJax: its core, the combined TeX/CHTML
#: configuration, and what that configuration loads at run time.
MATHJAX_PARTS = ("MathJax.js", "config", "extensions", "jax", "fonts/HTML-CSS/TeX/woff")


#: A Markdown link's target: `](target)` or `](target#anchor)`.
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")
#: A link in a rendered notebook to a page beside it: `href="02_x.ipynb#Data"`.
NOTEBOOK_LINK = re.compile(r'href="([\w.-]+\.(?:ipynb|md))(#[^"]*)?"')
#: A widget's output as mkdocs-jupyter renders it: a div whose script names
#: the widget's model (its state is not on the page, so nothing is drawn).
WIDGET_OUTPUT = re.compile(
    r'<div class="jupyter-widgets jp-OutputArea-output"[^>]*>\s*'
    r'<script type="text/javascript">.*?</script>\s*'
    r'<script type="application/vnd.jupyter.widget-view\+json">\s*(\{.*?\})\s*'
    r"</script>\s*</div>",
    re.DOTALL,
)
#: The loader mkdocs-jupyter adds to a page with widgets: it fetches the widget
#: renderer from a CDN, which a page of stills does not need.
WIDGET_LOADER = re.compile(
    r"<script>\s*\(function\(\) \{\s*function addWidgetsRenderer\(\).*?</script>",
    re.DOTALL,
)


def site_anchor(anchor):
    """A Jupyter heading anchor as the site's: `#Against-a-CNN` -> `#against-a-cnn`.

    Jupyter (and GitHub) keep a heading's case and punctuation and write its
    spaces as dashes; the site's table of contents slugifies the heading.
    """
    return "#" + slugify(anchor.lstrip("#").replace("-", " "), "-") if anchor else ""


def on_files(files, config):
    changelog = (ROOT / "CHANGELOG.md").read_text()
    files.append(File.generated(config, "changelog.md", content=changelog))
    return files


def on_page_markdown(markdown, page, config, files):
    """Links to files of the repository outside docs/ point to the repository.

    A link whose target is neither a page nor a file of the repository is
    left as it is, so that the strict build fails on it.
    """
    page_dir = (Path(config["docs_dir"]) / page.file.src_uri).parent

    def repository_link(match):
        # A page of the site (a notebook, through the link docs/tutorial): its
        # heading anchors written as the site writes them.
        source = posixpath.normpath(
            posixpath.join(posixpath.dirname(page.file.src_uri), match.group(1))
        )
        if files.get_file_from_path(source) is not None:
            return f"]({match.group(1)}{site_anchor(match.group(2))})"
        target = (page_dir / match.group(1)).resolve()
        inside_docs = target.is_relative_to(Path(config["docs_dir"]).resolve())
        if inside_docs or not target.exists() or not target.is_relative_to(ROOT):
            return match.group(0)
        relative = target.relative_to(ROOT).as_posix()
        kind = "tree" if target.is_dir() else "blob"
        repository = config["extra"]["repository"]
        url = f"{repository}/{kind}/main/{relative}{match.group(2) or ''}"
        return f"]({url})"

    return LINK.sub(repository_link, markdown)


def widget_stills(html, notebook):
    """A notebook page's widget outputs replaced by their still PNG, if stored."""
    stills = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            view = data.get("application/vnd.jupyter.widget-view+json")
            if view and "image/png" in data:
                stills[view["model_id"]] = data["image/png"]

    def still(match):
        png = stills.get(json.loads(match.group(1))["model_id"])
        if png is None:
            return match.group(0)
        return (
            '<div class="jp-RenderedImage jp-OutputArea-output">'
            f'<img src="data:image/png;base64,{png.strip()}" alt="a still of the '
            'widget, which needs a running notebook"></div>'
        )

    html = WIDGET_OUTPUT.sub(still, html)
    if not WIDGET_OUTPUT.search(html):
        html = WIDGET_LOADER.sub("", html)
    return html


def on_page_content(html, page, config, files):
    """A notebook page as the site serves it: widget stills, and site links.

    Its widget outputs become their stored stills (`widget_stills`). And
    mkdocs-jupyter renders a notebook's markdown itself, so MkDocs does not
    rewrite its links: `02_train_on_mnist.ipynb#Data` would point at a file
    the site does not serve; they become links to the pages beside it.
    """
    if not page.file.src_uri.endswith(".ipynb"):
        return html
    html = widget_stills(html, Path(page.file.abs_src_path))
    folder = posixpath.dirname(page.file.src_uri)

    def site_link(match):
        page_file = files.get_file_from_path(posixpath.join(folder, match.group(1)))
        if page_file is None:
            return match.group(0)
        url = page_file.url_relative_to(page.file)
        return f'href="{url}{site_anchor(match.group(2))}"'

    return NOTEBOOK_LINK.sub(site_link, html)


def on_post_build(config):
    if not (MATHJAX / "MathJax.js").exists():
        raise FileNotFoundError(
            f"MathJax is missing from {MATHJAX}: run `make docs`, which fetches it"
        )
    target = Path(config["site_dir"]) / "assets" / "mathjax"
    for part in MATHJAX_PARTS:
        source = MATHJAX / part
        if source.is_dir():
            shutil.copytree(source, target / part, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / part)
