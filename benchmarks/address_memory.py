"""Memory per address of the view identities and step 7's address book (``tracemalloc``).

    python benchmarks/address_memory.py              # 100,000 product addresses
    python benchmarks/address_memory.py --pages 20000

``core.cluster.viewidentity.AddressIdentities`` keeps, per address, a 64-bit key
(``distinct.scoped_hash``), its dictionary slot and the identity digest its page
declared (a 16-character string, made per page as in a crawl and kept here);
``core.cluster.views.AddressBook`` keeps, per listed canonical page, its key and
entry in two dictionaries.  Each is filled with ``--pages`` distinct addresses of
one host and the traced bytes it grew by are divided by that number.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tracemalloc
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]

from simhash_scrapy.core.cluster.viewidentity import AddressIdentities  # noqa: E402
from simhash_scrapy.core.cluster.views import AddressBook  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100_000, help="addresses (default 100,000)")
    n = parser.parse_args().pages
    urls = [f"https://shop.example.com/p/product-{i}" for i in range(n)]
    addresses = [f"shop.example.com/p/product-{i}" for i in range(n)]
    tracemalloc.start()
    identities = AddressIdentities(max_addresses=n)
    before = tracemalloc.get_traced_memory()[0]
    for i, url in enumerate(urls):
        identities.resolve("shop.example.com", url, hashlib.blake2b(str(i).encode(), digest_size=8).hexdigest())
    print(f"AddressIdentities: {(tracemalloc.get_traced_memory()[0] - before) / n:.0f} bytes per address")
    book = AddressBook()
    before = tracemalloc.get_traced_memory()[0]
    for i, address in enumerate(addresses):
        book.add("shop.example.com", address, i)
    print(f"AddressBook: {(tracemalloc.get_traced_memory()[0] - before) / n:.0f} bytes per listed page")


if __name__ == "__main__":
    main()
