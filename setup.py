"""Build script for the optional C speed-up (everything else is in pyproject.toml).

``simhash_scrapy.core._speedups`` walks the lxml tree in C (see the file's header).
It is optional: without a C compiler the package installs all the same and
uses the pure-Python path, which gives the same results, only slower.

It is compiled against the lxml of the build environment, through lxml's own
headers (``lxml.get_include()``: ``lxml.etree_api.h``, ``lxml-version.h`` and
the libxml2 headers lxml was built with).  An isolated build installs the
newest lxml, which may not be the one installed at run time: the module
records the versions it was built against and ``simhash_scrapy.core._native``
uses it only when they are the running ones (else the pure-Python path, with
one logged warning).  ``pip install --no-build-isolation`` builds against the
installed lxml.
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
