"""Every default, in one place: the library's and the plugin's are the same values.

``fingerprint_html``, ``BlockPermutedIndex``, ``FeatureConfig``, the
``scrapy simhash`` commands and the crawl (``SimhashConfig``) all take their
defaults from here, so the same page gets the same fingerprint and the same
decision on every path.  The detection defaults (text mode, k, minimum
tokens, features) were chosen on the tuning half of the evaluation set
(``benchmarks/quality``; docs: ``quality.md``).

This module imports nothing: plain values, and one rule (``default_blocks``).
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
#: ``SIMHASH_BLOCKS``: blocks of the block-permuted index; ``None`` means ``default_blocks(k)``.
BLOCKS: int | None = None


def default_blocks(max_distance: int) -> int:
    """The blocks of the in-process index when ``SIMHASH_BLOCKS`` is None: k + 1, except 3 at k = 4.

    At k = 4, k + 1 = 5 blocks give 13-bit table keys (~120 rows a bucket at 1M
    stored); 3 blocks, each matched within one bit, give ~21-bit keys in 3 tables
    (``core/index/index_layout.py``): about 3x the queries/s at 1M and less memory
    (``python benchmarks/core.py``).  The Redis backend's layout needs B > k and
    keeps k + 1 (``backends/redis/``).
    """
    return 3 if max_distance == 4 else max_distance + 1
#: ``SIMHASH_MIN_TOKENS``: pages with fewer tokens than this (but at least one)
#: are "short": compared by an exact digest of their text, not by simhash.
MIN_TOKENS = 30
#: ``SIMHASH_ONE_EDIT_BELOW``: pages of ``MIN_TOKENS`` (at least 30) up to this many tokens (exclusive) are
#: also near-duplicates when their token sequences are one token apart (``core.features.edits``); 0: off.
#: Chosen on the tuning half (docs: ``quality.md``).
ONE_EDIT_BELOW = 64
#: The one-edit rule never applies below this many tokens, whatever ``SIMHASH_MIN_TOKENS``: in a
#: shorter page one word is what the page says (soft-404 shells of two sites that differ in the
#: site's name, "Size: 3 dwords" / "Size: 4 dwords"; docs: ``quality.md``).
ONE_EDIT_MIN_TOKENS = 30

#: Feature settings (``SIMHASH_WORD_NGRAM``, ``SIMHASH_CHAR_NGRAM``,
#: ``SIMHASH_WEIGHTING``, ``SIMHASH_CJK_NGRAM``); ``features.DEFAULT_FEATURES`` is built from them.
WORD_NGRAM = 1
CHAR_NGRAM = 0
WEIGHTING = "log"
CJK_NGRAM = 2
#: The ``"log"`` weighting's slope: a feature seen ``tf`` times weighs ``1 + LOG_WEIGHT_SLOPE * ln(tf)``.
#: Chosen on the tuning half as the slope with the highest expected F1 at k = 4 (docs:
#: ``quality.md``); 1 is the classic sublinear tf (``"sublinear"``).
LOG_WEIGHT_SLOPE = 6.0

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
#: ``SIMHASH_DISTINCT_SELECTORS``: CSS selectors whose text must also be equal for two pages to be
#: near-duplicates (``core.cluster.distinct``); none by default.
DISTINCT_SELECTORS: tuple[str, ...] = ()
#: ``SIMHASH_IDENTITY_SIGNALS``: pages that declare different identities (schema.org SKU, GTIN, MPN,
#: productID, price or product name; ``product:`` meta; pagination) are never near-duplicates
#: (``core.cluster.identity``); ``False`` merges them (product variants) by their text alone.
IDENTITY_SIGNALS = True
#: ``SIMHASH_UNCHANGED``: what a re-crawl does with a page whose content is
#: unchanged since its last recorded version: ``"pass"`` (goes on, flagged in
#: meta), ``"drop_items"`` (its items are dropped), ``"drop"`` (the page is dropped).
UNCHANGED = "pass"
#: ``SIMHASH_EDITED``: the same choices for an *edited* page (its text differs from its last
#: recorded version, but its simhash is within k of it).
EDITED = "pass"
#: ``SIMHASH_CONDITIONAL``: a re-crawl with a store (``SIMHASH_DIR``, ``JOBDIR``, Redis) sends the
#: recorded ``ETag`` / ``Last-Modified`` as ``If-None-Match`` / ``If-Modified-Since``; a 304 is unchanged.
CONDITIONAL = True
#: ``SIMHASH_REPLAY``: a 304 answer to a conditional request schedules again the requests its page's callback
#: yielded when the page was last downloaded (kept beside the store), so a re-crawl reaches every page.
REPLAY = True
#: ``SIMHASH_TEMPLATES``: learn, per host, the text lines repeated across different articles
#: (``core.cluster.sitetemplate``) and also match a page by its text without them (in-process and store
#: backends; chosen on the real-web tuning half, ``benchmarks/quality``).
TEMPLATES = True
#: ``SIMHASH_SECOND_SIMHASH``: give each page a second, independent simhash (``core.features.second``) and join a
#: page to a canonical page whose second simhash is within k when their first ones are within 2k
#: (in-process and store backends; chosen on the tuning halves, ``benchmarks/quality``).
SECOND_SIMHASH = True
#: ``SIMHASH_CONTAINMENT``: give each page a sketch of its sentences (``core.cluster.containment``) and join a page
#: that nothing else matched to a canonical page whose sentences hold its own, or the other way round
#: (in-process and store backends; chosen on the tuning halves, ``benchmarks/quality/containment.py``).
CONTAINMENT = True
#: ``SIMHASH_REPRESENTATIVE``: which member represents a cluster in reports and meta:
#: ``"best"`` (rel=canonical target, no query, not a copy by its canonical tag or URL, first crawled;
#: ``core.cluster.representative``) or ``"first"`` (the first page crawled, the matching anchor).
REPRESENTATIVE = "best"
#: ``SIMHASH_KEEP_PER_CLUSTER``: how many members of a cluster pass (the first N in crawl order).
KEEP_PER_CLUSTER = 1
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
#: ``SIMHASH_REDIS_SHARDS``: hash slots the identity records of one scope are spread over (1: the
#: scope's own slot, next to its log; more: a Redis Cluster spreads one scope over its nodes).
REDIS_SHARDS = 1
#: ``SIMHASH_REDIS_TABLE_BLOCKS``: blocks of the global index's tables (``"redis-global"``; 0: k + 1).
REDIS_TABLE_BLOCKS = 0
#: ``SIMHASH_REDIS_BUCKET_BITS``: key bits of a table bucket of the global index (one Redis key each).
REDIS_BUCKET_BITS = 16
#: ``SIMHASH_REDIS_GLOBAL_CACHE``: directory slots a worker of the global index keeps (seq -> identity).
REDIS_GLOBAL_CACHE = 1_000_000
#: ``SIMHASH_REDIS_BUCKET_CACHE``: MB of table buckets a worker of the global index keeps (a bucket read again costs
#: its new entries only).  Off: on loopback it costs more worker CPU than the bytes it saves (docs/guides/redis.md);
#: it is for workers whose network to Redis is what limits them.
REDIS_BUCKET_CACHE = 0
#: ``SIMHASH_REDIS_MODULE``: whether the global index's checks use the ``simhash`` Redis module ("auto": where every
#: primary has it).
REDIS_MODULE = "auto"

# ------------------------------------------------------------------ URL rules
#: ``SIMHASH_URL_RULES``: ``"off"``, ``"learn"`` (learn and report rules) or
#: ``"skip"`` (also skip requests a trusted rule predicts to be duplicates).
URL_RULES = "off"
#: ``SIMHASH_URL_RULES_MIN_SUPPORT``: confirmations a rule needs before it is trusted.
URL_RULES_MIN_SUPPORT = 3
#: ``SIMHASH_URL_RULES_MIN_PRECISION``: the lower 95 % (Wilson) bound on a rule's
#: precision must reach this for the rule to be trusted.
URL_RULES_MIN_PRECISION = 0.7
#: ``SIMHASH_URL_RULES_EXPLORE``: share of predicted duplicates downloaded anyway to verify the rules.
URL_RULES_EXPLORE = 0.05
#: ``SIMHASH_URL_RULES_CANONICAL``: learn from ``<link rel="canonical">`` declarations too.
URL_RULES_CANONICAL = True
#: Seconds between saves of the learned rules to the backend (also saved at close).
URL_RULES_SAVE_INTERVAL = 30.0
#: Name of the rules' blob in the backend (``load_extra`` / ``save_extra``).
URL_RULES_EXTRA = "url_rules"
