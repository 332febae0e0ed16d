"""Sphinx extension of the simhash-scrapy docs: the settings reference, generated.

``reference/settings.md`` holds a ``{simhash-settings}`` block; before the page is parsed it is
replaced by one section per layer (``render_settings``), made from ``simhash_scrapy.core.settings.settings.SETTINGS``
(records with ``name, type, doc, example, layer`` and ``default_text``, the default as the
documentation writes it) and ``LAYERS`` (the layers' titles, in the order shown). Each layer gets the label ``settings-<layer>`` and each setting ``setting-<name>`` (lower case,
``_`` and spaces as ``-``): ``[SIMHASH_DIR](#setting-simhash-dir)`` links to one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

MARKER = "```{simhash-settings}\n```"


def load_settings() -> tuple[Sequence[Any], dict[str, str]]:
    """The settings records and the layer titles, from the package's one table."""
    from simhash_scrapy.core.settings import settings as table

    return tuple(table.SETTINGS), dict(table.LAYERS)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _code(source: str) -> str:
    fence = "``" if "`" in source else "`"
    pad = " " if source.startswith("`") or source.endswith("`") else ""
    return f"{fence}{pad}{source}{pad}{fence}"


def layer_label(layer: str) -> str:
    return "settings-" + re.sub(r"[^a-z0-9]+", "-", layer.lower()).strip("-")


def setting_label(name: str) -> str:
    return "setting-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def render_settings(settings: Sequence[Any], layers: dict[str, str]) -> str:
    """The settings reference as Markdown: per layer a labelled heading, per setting a labelled heading,
    its documentation and one line of type, default and example."""
    order = list(layers) + [s.layer for s in settings if s.layer not in layers]
    out = []
    for layer in dict.fromkeys(order):
        rows = [s for s in settings if s.layer == layer]
        if not rows:
            continue
        out += [f"({layer_label(layer)})=", "", f"## {layers.get(layer, layer)}", ""]
        for s in rows:
            default = s.default_text  # the table's own rendering of the default (``Setting.default_text``)
            example = s.example if s.example.startswith("`") else _code(f"{s.name} = {s.example}")
            out += [f"({setting_label(s.name)})=", "", f"### {_code(s.name)}", "", _one_line(s.doc), ""]
            out += [f"**Type:** {_one_line(s.type)} · **Default:** {_one_line(default)} · **Example:** {example}", ""]
    return "\n".join(out)


def _source_read(app: Any, docname: str, source: list[str]) -> None:
    if MARKER in source[0]:
        source[0] = source[0].replace(MARKER, render_settings(*load_settings()))


def _always_rebuilt(app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """The generated page depends on the code's settings table, not on its own source: read it on every build."""
    return [name for name in env.found_docs if name == "reference/settings"]


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _source_read)
    app.connect("env-get-outdated", _always_rebuilt)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
