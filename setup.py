"""Build script for the optional C helpers (everything else is in pyproject.toml).

Two extensions, each optional and each loaded on its own by
``simhash_scrapy.core._native`` (see the files' headers):

- ``simhash_scrapy.core._speedups`` (``core/_speedups.c``): the tokeniser's
  hashes, the UTF-8 check and the index's query loop; Python's headers only.
- ``simhash_scrapy.core.extract._walker`` (``core/extract/_walker.c``): the walks over lxml's
  trees (visible text, main content), compiled against the lxml of the build
  environment through lxml's own headers (``lxml.get_include()``:
  ``lxml.etree_api.h``, ``lxml-version.h`` and the libxml2 headers lxml was
  built with).  An isolated build installs the newest lxml, which may not be
  the one installed at run time: the module records the versions it was built
  against and ``_native`` uses it only when they are the running ones (else
  the pure-Python walks, with one logged warning; ``_speedups`` stays on).
  ``pip install --no-build-isolation`` builds against the installed lxml.

And one shared object for redis-server, not for Python:

- ``simhash_scrapy.backends.redis.module._simhash_redis``
  (``backends/redis/module/simhash_module.c``): the ``simhash`` Redis module
  (``redis-server --loadmodule``) that ``SIMHASH_BACKEND = "redis-global"``
  uses where every node has it; no Redis header needed.

Without a C compiler the package installs all the same and uses the
pure-Python path, which gives the same results, only slower.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the optional extensions; on failure say once each, plainly, what that means (shown by ``pip -v``).

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


#: The bucket scan both ``_speedups`` and the Redis module compile (MANIFEST.in puts it in the sdist).
NEAR_SCAN = "simhash_scrapy/core/near_scan.h"


def _lxml_includes() -> list[str]:
    try:
        import lxml
    except ImportError:  # not in the build environment: the walker fails to compile and is skipped
        return []
    return lxml.get_include()


setup(
    cmdclass={"build_ext": OptionalBuildExt},
    ext_modules=[
        Extension("simhash_scrapy.core._speedups", ["simhash_scrapy/core/_speedups.c"], depends=[NEAR_SCAN],
                  optional=True),
        Extension(
            "simhash_scrapy.core.extract._walker",
            ["simhash_scrapy/core/extract/_walker.c"],
            include_dirs=_lxml_includes(),
            optional=True,
        ),
        Extension(
            "simhash_scrapy.backends.redis.module._simhash_redis",
            ["simhash_scrapy/backends/redis/module/simhash_module.c"],
            depends=[NEAR_SCAN],
            optional=True,
        ),
    ]
)
