"""Settings of the test project: the simhash add-on, a local site, one request at a time."""

BOT_NAME = "crawl_project"
SPIDER_MODULES = ["crawl_project.spiders"]
NEWSPIDER_MODULE = "crawl_project.spiders"

ADDONS = {"simhash_scrapy.Addon": 0}

ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
RETRY_ENABLED = False
CONCURRENT_REQUESTS = 1
LOG_LEVEL = "INFO"
LOGSTATS_INTERVAL = 0
