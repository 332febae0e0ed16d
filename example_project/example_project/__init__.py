"""Example Scrapy project for simhash-scrapy (see docs/readme/example.md)."""
