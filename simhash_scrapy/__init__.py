"""simhash-scrapy: find near-duplicate pages while a Scrapy crawl runs.

The algorithm core (``simhash_scrapy.core``) imports no Scrapy; the Scrapy
components (``Addon``, ``SimhashMiddleware``, ``SimhashPipeline``) are loaded
on first use, so ``import simhash_scrapy`` works without Scrapy installed.
See ``docs/ARCHITECTURE.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.analysis import Analysis, AnalysisOptions, analyse_html, analyse_text, fingerprint_html
from .core.cluster.clustering import Outcome
from .core.defaults import MAX_DISTANCE, MIN_TOKENS
from .core.detector import Detector, Page, PageDecision, assign_canonicals, decide, decide_html, page_of
from .core.features.exact import exact_digest
from .core.features.features import DEFAULT_FEATURES, FeatureConfig, feature_hashes, tokenize
from .core.features.fingerprint import fingerprint, hamming_distance, similarity, simhash_from_features
from .core.index.index import BlockPermutedIndex, IndexFormatError, Match
from .core.extract.text import extract_text, extract_text_bytes
from .core.urlrules.urlrules import UrlRuleLearner

__version__ = "0.2.0"

__all__ = [
    "__version__",
    "extract_text",
    "extract_text_bytes",
    "fingerprint",
    "fingerprint_html",
    "analyse_html",
    "analyse_text",
    "Analysis",
    "AnalysisOptions",
    "exact_digest",
    "feature_hashes",
    "simhash_from_features",
    "hamming_distance",
    "similarity",
    "tokenize",
    "FeatureConfig",
    "DEFAULT_FEATURES",
    "BlockPermutedIndex",
    "Match",
    "IndexFormatError",
    "Outcome",
    "assign_canonicals",
    "Detector",
    "Page",
    "PageDecision",
    "decide",
    "decide_html",
    "page_of",
    "MIN_TOKENS",
    "MAX_DISTANCE",
    "Addon",
    "SimhashMiddleware",
    "SimhashPipeline",
    "SimhashSpiderMiddleware",
    "UrlRulesMiddleware",
    "PredictedDuplicate",
    "UrlRuleLearner",
]

if TYPE_CHECKING:  # pragma: no cover
    from .addon import Addon
    from .middleware import SimhashMiddleware
    from .pipeline import SimhashPipeline
    from .spidermw import SimhashSpiderMiddleware
    from .urlrules import PredictedDuplicate, UrlRulesMiddleware

_LAZY = {
    "Addon": ".addon",
    "SimhashMiddleware": ".middleware",
    "SimhashPipeline": ".pipeline",
    "SimhashSpiderMiddleware": ".spidermw",
    "UrlRulesMiddleware": ".urlrules",
    "PredictedDuplicate": ".urlrules",
}


def __getattr__(name: str) -> Any:
    # Scrapy components are imported on first use so the core stays Scrapy-free.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simhash_scrapy' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
