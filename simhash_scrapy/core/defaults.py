"""Every default, in one place: the library's and the plugin's are the same values.

``fingerprint_html``, ``BlockPermutedIndex``, ``FeatureConfig``, the
``scrapy simhash`` commands and the crawl (``SimhashConfig``) all take their
defaults from here, so the same page gets the same fingerprint and the same
decision on every path.  The detection defaults (text mode, k, minimum
tokens, features) were chosen on the tuning half of the evaluation set
(``benchmarks/quality``; README, "Detection quality").

This module imports nothing: plain values only.
"""

from __future__ import annotations

# ----------------------------------------------------------------- detection
#: ``SIMHASH_TEXT_MODE``: ``"main"`` fingerprints the main content (navigation,
#: headers and footers removed), ``"visible"`` all visible text.
TEXT_MODE = "main"
#: ``main_content`` argument of the library functions (``TEXT_MODE == "main"``).
MAIN_CONTENT = TEXT_MODE == "main"
#: ``SIMHASH_MAX_DISTANCE``: the largest Hamming distance (k) between near-duplicates.
MAX_DISTANCE = 4
#: ``SIMHASH_BLOCKS``: blocks of the block-permuted index; ``None`` means ``MAX_DISTANCE + 1``.
BLOCKS: int | None = None
#: ``SIMHASH_MIN_TOKENS``: pages with fewer tokens than this (but at least one)
#: are "short": compared by an exact digest of their text, not by simhash.
MIN_TOKENS = 30

#: Feature settings (``SIMHASH_WORD_NGRAM``, ``SIMHASH_CHAR_NGRAM``,
#: ``SIMHASH_WEIGHTING``, ``SIMHASH_CJK_NGRAM``); ``features.DEFAULT_FEATURES`` is built from them.
WORD_NGRAM = 1
CHAR_NGRAM = 0
WEIGHTING = "sublinear"
CJK_NGRAM = 2

# ---------------------------------------------------------------- page input
#: ``SIMHASH_MAX_BYTES``: larger bodies are skipped (``simhash/skipped/too_large``).
MAX_BYTES = 10 * 1024 * 1024
#: ``SIMHASH_CONTENT_TYPES``: media types that are fingerprinted.
CONTENT_TYPES = ("text/html", "application/xhtml+xml")
#: ``SIMHASH_HTTP_STATUSES``: statuses that are fingerprinted.
HTTP_STATUSES = tuple(range(200, 300))

# -------------------------------------------------------------------- plugin
ACTION = "drop"
SCOPE = "spider"
#: ``SIMHASH_UNCHANGED``: what a re-crawl does with a page whose content is
#: unchanged since its last recorded version: ``"pass"`` (goes on, flagged in
#: meta), ``"drop_items"`` (its items are dropped), ``"drop"`` (the page is dropped).
UNCHANGED = "pass"
ITEM_URL_FIELD = "url"
ITEM_FORMAT = "auto"
LOG_LEVEL = "DEBUG"
THREADS = True
BACKEND = "memory"

# ------------------------------------------------------------- persistence
#: ``SIMHASH_DIR = True`` uses this folder under the project's ``.scrapy`` folder.
STORE_DIR = "simhash"
#: Name of the store inside ``JOBDIR``.
JOB_STORE_NAME = "simhash.store"
#: ``SIMHASH_FLUSH_INTERVAL``: seconds between writes of the store to the OS
#: (a ``kill -9`` loses at most the pages checked in that interval).
FLUSH_INTERVAL = 1.0

# -------------------------------------------------------------------- Redis
#: ``SIMHASH_REDIS_KEY``: key prefix template (scrapy-redis style ``%(spider)s``).
REDIS_KEY = "%(spider)s:simhash"
REDIS_HOST = "localhost"
REDIS_PORT = 6379
REDIS_FAIL_OPEN = True
#: ``SIMHASH_REDIS_TTL``: seconds before idle keys expire (0: never).
REDIS_TTL = 0.0
#: ``SIMHASH_REDIS_HEARTBEAT``: seconds between a worker's heartbeats; after an outage, checks
#: resume within one heartbeat of Redis answering again.
REDIS_HEARTBEAT = 1.0
#: ``SIMHASH_REDIS_CAPACITY``: pages per scope the Redis key layout is sized for (memory per page).
REDIS_CAPACITY = 10_000_000
