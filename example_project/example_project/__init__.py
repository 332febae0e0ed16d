"""Example Scrapy project for simhash-scrapy (see the docs: ``getting-started.md``, "The example project")."""
