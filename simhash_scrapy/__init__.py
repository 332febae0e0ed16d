"""simhash-scrapy: find near-duplicate pages while a Scrapy crawl runs.

The algorithm core (``text``, ``boilerplate``, ``features``, ``fingerprint``,
``index``) does not import Scrapy; the Scrapy components are loaded lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .features import DEFAULT_FEATURES, FeatureConfig, feature_hashes, tokenize
from .fingerprint import fingerprint, hamming_distance, similarity, simhash_from_features
from .index import BlockPermutedIndex, IndexFormatError, Match
from .text import extract_text, extract_text_bytes

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "extract_text",
    "fingerprint",
    "fingerprint_html",
    "hamming_distance",
    "similarity",
    "tokenize",
    "FeatureConfig",
    "DEFAULT_FEATURES",
    "BlockPermutedIndex",
    "Match",
    "IndexFormatError",
    "MIN_TOKENS",
]

#: Pages with fewer tokens than this have too little text to fingerprint.
MIN_TOKENS = 30


def fingerprint_html(
    html: str | bytes,
    encoding: str | None = None,
    main_content: bool = False,
    features: FeatureConfig = DEFAULT_FEATURES,
    min_tokens: int = MIN_TOKENS,
) -> int | None:
    """Extract the visible text of ``html`` and fingerprint it.

    Returns ``None`` when the page has fewer than ``min_tokens`` tokens: such
    pages (empty, error shells, pure navigation) would all collide on a few
    fingerprints, so they must be skipped, never matched.
    """
    text = extract_text_bytes(html, encoding=encoding, main_content=main_content)
    hashes, weights, tokens = feature_hashes(text, features, with_token_count=True)
    if tokens < min_tokens:
        return None
    return simhash_from_features(hashes, weights)


if TYPE_CHECKING:  # pragma: no cover
    from .addon import Addon
    from .middleware import SimhashMiddleware
    from .pipeline import SimhashPipeline

_LAZY = {
    "Addon": ".addon",
    "SimhashMiddleware": ".middleware",
    "SimhashPipeline": ".pipeline",
}


def __getattr__(name: str) -> Any:
    # Scrapy components are imported on first use so the core stays Scrapy-free.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simhash_scrapy' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
