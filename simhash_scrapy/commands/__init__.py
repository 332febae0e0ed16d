"""``scrapy simhash ...``: tools for people (compare, report, dedup).

Registered through the ``scrapy.commands`` entry point group
(``simhash = "simhash_scrapy.commands.simhash:Command"``), so they work inside
and outside a Scrapy project.  See the docs, ``guides/commands.md``.
"""
