"""Sphinx configuration of the simhash-scrapy docs (``sphinx-build -W --keep-going -n -b html docs docs/_build/html``)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import simhash_scrapy  # noqa: E402

project = "simhash-scrapy"
author = "the simhash-scrapy authors"
copyright = "the simhash-scrapy authors"
release = version = simhash_scrapy.__version__

extensions = ["myst_parser", "simhash_docs"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

# Links to headings ([text](#slug)) are checked like every other reference (-n).
myst_heading_anchors = 4
nitpicky = True

html_theme = "furo"
html_title = f"simhash-scrapy {release}"
html_static_path = ["_static"]
