"""The algorithm core: page -> text -> features -> fingerprint -> index -> clusters -> report.

Imports no Scrapy, no Twisted, no redis and nothing of the plugin around it
(an import-linter contract in ``pyproject.toml`` checks this in CI).  One job
per module; see ``docs/ARCHITECTURE.md``.
"""
