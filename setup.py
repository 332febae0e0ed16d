"""Build script for the optional C speed-up (everything else is in pyproject.toml).

``simhash_scrapy.core._speedups`` walks the lxml tree in C (see the file's header).
It is optional: without a C compiler the package installs all the same and
uses the pure-Python path, which gives the same results, only slower.
"""

from setuptools import Extension, setup


def _lxml_includes() -> list[str]:
    try:
        import lxml
    except ImportError:  # not in the build environment: the extension is skipped
        return []
    return lxml.get_include()


setup(
    ext_modules=[
        Extension(
            "simhash_scrapy.core._speedups",
            ["simhash_scrapy/core/_speedups.c"],
            include_dirs=_lxml_includes(),
            optional=True,
        )
    ]
)
