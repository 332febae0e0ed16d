"""Prints the path of the ``simhash`` Redis module: ``redis-server --loadmodule "$(python -m ...)"``."""

import sys

from . import path

built = path()
if built is None:
    sys.exit("simhash-scrapy's Redis module was not built (no C compiler when the package was installed): "
             "reinstall it where one is (pip install --force-reinstall --no-binary simhash-scrapy simhash-scrapy)")
print(built)
