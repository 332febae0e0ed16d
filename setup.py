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

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the optional extension; on failure say once, plainly, what that means (shown by ``pip -v``).

    At run time ``simhash_scrapy.core._native`` logs the same fact once at import.
    """

    def build_extensions(self) -> None:
        # SIMHASH_REQUIRE_SPEEDUPS=1 (CI, cibuildwheel): a build without the C helpers is a failure.
        if os.environ.get("SIMHASH_REQUIRE_SPEEDUPS") == "1":
            for ext in self.extensions:
                ext.optional = False
        super().build_extensions()

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - any compiler failure; the extension is optional
            if not getattr(ext, "optional", False):
                raise
            self.warn(
                f"simhash-scrapy: the optional C helpers ({ext.name}) were not built "
                f"({type(exc).__name__}: the compiler's output is above): the package installs "
                "and uses the pure-Python path (same results, slower)"
            )


def _lxml_includes() -> list[str]:
    try:
        import lxml
    except ImportError:  # not in the build environment: the extension is skipped
        return []
    return lxml.get_include()


setup(
    cmdclass={"build_ext": OptionalBuildExt},
    ext_modules=[
        Extension(
            "simhash_scrapy.core._speedups",
            ["simhash_scrapy/core/_speedups.c"],
            include_dirs=_lxml_includes(),
            optional=True,
        )
    ]
)
