# Scrapy settings of the simhash-scrapy example project.
#
#     cd example_project && scrapy crawl site
#
# crawls the bundled sample site (served on 127.0.0.1), prints the simhash
# stats and writes a cluster report to reports/site-<time>.jsonl.

BOT_NAME = "example_project"

SPIDER_MODULES = ["example_project.spiders"]
NEWSPIDER_MODULE = "example_project.spiders"

# --- simhash-scrapy -----------------------------------------------------------
# The one line that turns the plugin on (downloader middleware + item pipeline).
ADDONS = {"simhash_scrapy.Addon": 0}

# Drop near-duplicates before they reach the spider ("flag" lets them through
# with "near-duplicate" in response.flags).
SIMHASH_ACTION = "drop"
# Fingerprint the main content only, not the site's navigation, sidebar and
# footer.  This is the default, spelled out because the sample site needs it:
# its reference pages share a template that outweighs their own text.  With
# "visible" (-s SIMHASH_TEXT_MODE=visible) distinct reference and hub pages
# land in false clusters, and printer-friendly and reposted copies are missed.
SIMHASH_TEXT_MODE = "main"
# Cluster report written when the spider closes; %(name)s and %(time)s expand
# as in FEEDS.  Relative paths are relative to the folder you run scrapy from.
SIMHASH_REPORT_URI = "reports/%(name)s-%(time)s.jsonl"
SIMHASH_REPORT_FORMAT = "jsonl"
# Log every near-duplicate (not only the first one), at INFO so the lines show
# with LOG_LEVEL = "INFO" below.
SIMHASH_DEBUG = True
SIMHASH_LOG_LEVEL = "INFO"

# --- crawling -----------------------------------------------------------------
# Polite defaults for real sites (-a start_url=...).  For the bundled site the
# spider lowers the delay and raises the concurrency (it is our own server).
ROBOTSTXT_OBEY = True
USER_AGENT = "simhash-scrapy-example (+https://pypi.org/project/simhash-scrapy/)"
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 0.5
DEPTH_LIMIT = 10

LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
