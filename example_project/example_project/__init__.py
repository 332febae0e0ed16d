"""Example Scrapy project for simhash-scrapy (see the README, "The example project")."""
