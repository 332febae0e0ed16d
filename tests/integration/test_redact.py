"""No password reaches a log line, a stat, an error, a report or a command's output.

``core.redact.redact`` is the one redaction function: tested on every form redis-py
accepts, then through the real parts: a redis-server with ``requirepass`` (and ACL
users), real crawls given a wrong and a right password in each form, a crawl whose
Redis dies mid-way, and ``scrapy simhash report --redis``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_twisted
from conftest import RecordingSpider, run_crawl
from redis_server import RedisServer
from command_helpers import simhash
from test_redis_backend import KillRedisMiddleware, async_test, make_backend

from simhash_scrapy.backends import BackendError, PageRecord
from simhash_scrapy.config import RedisConfig
from simhash_scrapy.core.redact import MASK, redact, secrets_in

from crawl_helpers import PROJECT, crawl_command, crawl_env, make_site, parse_stats  # noqa: E402

pytest_plugins = ["conftest_redis"]

PACKAGE = Path(__file__).parents[2] / "simhash_scrapy"

DEFAULT_PW = "Sekr1t-default-7f3a"
ALICE_PW = "Alice-Pw-91c2"
#: Every character a URL must encode: the URL holds it percent-encoded, a client may echo it decoded.
BOB_PW = "b0b@pa:ss/w#rd?x=1&y%z +q"
WRONG_PW = "Wrong-Pass-5d1e"
REFUSED = "invalid username-password pair"


# ------------------------------------------------------------------- units
FORMS = [
    ("redis://:{pw}@127.0.0.1:6379/0", "127.0.0.1:6379"),
    ("redis://alice:{pw}@127.0.0.1:6379/0", "alice:***@127.0.0.1"),
    ("rediss://:{pw}@cache.example:6380/2", "cache.example:6380"),
    ("rediss://alice:{pw}@cache.example:6380/2?ssl_cert_reqs=none", "ssl_cert_reqs=none"),
    ("unix://:{pw}@/var/run/redis.sock?db=1", "/var/run/redis.sock"),
    ("unix:///var/run/redis.sock?db=1&password={pw}", "db=1"),
    ("redis://127.0.0.1:6379/0?password={pw}", "127.0.0.1:6379/0"),
    ("redis://127.0.0.1:6379/0?db=0&password={pw}&socket_timeout=5", "socket_timeout=5"),
    ("redis://127.0.0.1:6379/0?PASSWORD={pw}", "127.0.0.1"),
    ("Error 111 connecting to redis://:{pw}@10.0.0.1:6379/0. Connection refused.", "Connection refused"),
    ("ValueError: bad URL 'redis://bob:{pw}@h:1/0' (no such scheme)", "no such scheme"),
    ("REDIS_PARAMS must be a dict, got {{'password': '{pw}', 'db': 1}}", "'db': 1"),
    ('REDIS_PARAMS must be a dict (or JSON object), got \'{{"password": "{pw}", "db": 1}}\'', '"db": 1'),
    ("Connection<host=h,port=1,db=0,password={pw}>", "port=1"),
    ("ssl_password={pw}", "ssl_password="),
]


@pytest.mark.parametrize("password", ["s3cret-pw", "x", "p%40ss%2Fword", "p@ss", "UPPER.lower_9~"])
@pytest.mark.parametrize(("form", "kept"), FORMS)
def test_every_form_is_masked(form: str, kept: str, password: str) -> None:
    text = form.format(pw=password)
    masked = redact(text)
    # Exactly the password is masked, the rest (host, port, database, other items) is kept.
    assert masked == form.format(pw=MASK), (text, masked)
    assert kept in masked
    assert redact(masked) == masked  # idempotent


def test_a_url_is_masked_whole_with_its_own_secrets() -> None:
    # A password redis-py reads although a URL should not hold it raw (a space): masked in the URL, and
    # wherever it is echoed, given the URL's secrets.
    url = "redis://:sp ace-pw@127.0.0.1:6379/0"
    assert redact(url, secrets_in(url)) == "redis://:***@127.0.0.1:6379/0"
    assert redact("refused 'sp ace-pw'", secrets_in(url)) == "refused '***'"


def test_the_password_of_a_url_with_an_unencoded_at_sign() -> None:
    # urlsplit (and redis-py) read the last "@" as the end of the user information.
    assert redact("redis://:p@ss@h:1/0") == "redis://:***@h:1/0"


def test_percent_encoded_passwords_are_masked_decoded_too() -> None:
    url = f"redis://bob:{quote(BOB_PW, safe='')}@127.0.0.1:6379/0"
    secrets = secrets_in(url)
    assert BOB_PW in secrets and quote(BOB_PW, safe="") in secrets
    # A client that echoes the decoded password: masked as a known secret.
    echoed = f"AuthenticationError: user bob, password {BOB_PW!r} refused; url {url}"
    masked = redact(echoed, secrets)
    assert BOB_PW not in masked and quote(BOB_PW, safe="") not in masked, masked
    assert "user bob" in masked and "127.0.0.1:6379" in masked


def test_parameter_mappings() -> None:
    params = {"password": "pw-in-params", "db": 3, "ssl_password": "key-pass", "retry_on_timeout": True,
              "connection_kwargs": {"password": "nested-pw"}, "url": "redis://:url-pw@h/0", "username": "alice"}
    masked = redact(params)
    assert masked == {"password": MASK, "db": 3, "ssl_password": MASK, "retry_on_timeout": True,
                      "connection_kwargs": {"password": MASK}, "url": "redis://:***@h/0", "username": "alice"}
    assert set(secrets_in(params)) >= {"pw-in-params", "key-pass", "nested-pw", "url-pw"}
    assert "pw-in-params" not in redact(repr(params)) and "nested-pw" not in redact(json.dumps(params))
    # The settings layer knows the secrets of the URL and REDIS_PARAMS together.
    config = RedisConfig.from_settings({"REDIS_URL": "redis://127.0.0.1/0?password=q-pw", "REDIS_PARAMS": params})
    assert {"q-pw", "pw-in-params"} <= set(config.secrets)


def test_a_printed_config_never_shows_the_password() -> None:
    # repr of the settings objects (a traceback's locals, a worker process's error) masks every form;
    # the values themselves stay usable.
    from simhash_scrapy.config import SimhashConfig

    settings = {"SIMHASH_REDIS_URL": f"redis://bob:{quote(BOB_PW, safe='')}@h:1/0",
                "REDIS_PARAMS": {"password": ALICE_PW, "db": 2}}
    config = SimhashConfig.from_settings(settings)
    for text in (repr(config), repr(config.redis), str(config)):
        assert_hidden((BOB_PW, quote(BOB_PW, safe=""), ALICE_PW), text)
        assert "params={'password': '***', 'db': 2}" in text and "@h:1/0" in text
    assert config.redis.params["password"] == ALICE_PW and quote(BOB_PW, safe="") in config.redis.url


def test_short_secrets_are_masked_in_their_forms_only() -> None:
    # A one-letter password is masked where it stands in a URL or an item, not as every such letter.
    assert redact("redis://:a@host/0 and a cat", secrets_in("redis://:a@host/0")) == "redis://:***@host/0 and a cat"


def test_text_without_secrets_is_unchanged() -> None:
    for text in ("redis://127.0.0.1:6379/0", "invalid username-password pair or user is disabled.",
                 "https://example.com/a?page=2", "unix:///tmp/redis.sock?db=0", "user@example.com wrote: hi"):
        assert redact(text) == text


def test_one_redaction_function() -> None:
    # No second masking rule anywhere in the package: every caller uses core.redact.
    found = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"^\s*def (_?redact\w*|_?mask\w*)\(", text, re.M) or ":***@" in text:
            found.append(str(path.relative_to(PACKAGE)))
    assert found == ["core/redact.py"], found


def test_page_urls_are_masked_where_they_are_written() -> None:
    """Report records, log records and the plugin's exception messages: the password masked, the user name
    kept; a page's text and the exceptions' URL attributes (an errback may request the page again) as they are."""
    import logging

    from simhash_scrapy.core.redact import LOG_REDACTION
    from simhash_scrapy.core.report.report import shown
    from simhash_scrapy.middleware import NearDuplicate, UncheckedPage
    from simhash_scrapy.pipeline import NearDuplicateItem
    from simhash_scrapy.urlrules import PredictedDuplicate

    url, other = "https://bob:Pg-pw-77@shop.example/a?x=1", "https://bob:Pg-pw-77@shop.example/b"
    masked = "https://bob:***@shop.example/a?x=1"
    record = {"url": url, "members": [{"url": other, "text": f"see {url}", "depth": 1}], "size": 2, "t": (url,)}
    assert shown(record) == {
        "url": masked, "members": [{"url": "https://bob:***@shop.example/b", "text": f"see {url}", "depth": 1}],
        "size": 2, "t": (masked,),
    }  # fmt: skip
    assert shown([{"url": "https://shop.example/c"}]) == [{"url": "https://shop.example/c"}]  # nothing to mask

    logger = logging.getLogger("simhash_scrapy.test_redact")
    logger.addFilter(LOG_REDACTION)
    logger.addFilter(LOG_REDACTION)  # once, however often
    assert logger.filters.count(LOG_REDACTION) == 1
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Keep()
    logger.addHandler(handler)
    try:
        logger.warning("page %(url)s: duplicates %(canonical)s (%(n)d)", {"url": url, "canonical": other, "n": 3})
        logger.warning("page %s, error %s, kept %s", url, ValueError(f"cannot read {other}"), 5)
        logger.warning(f"an f-string naming {url}")
    finally:
        logger.removeHandler(handler)
    assert lines == [
        f"page {masked}: duplicates https://bob:***@shop.example/b (3)",
        f"page {masked}, error cannot read https://bob:***@shop.example/b, kept 5",
        f"an f-string naming {masked}",
    ]

    # Each format, with and without a password in the report (the fast path renders once, as it is).
    from simhash_scrapy.core.redact import may_hold_password
    from simhash_scrapy.core.report.report import build_clusters, page_changes_csv, render_report

    for first in (url, "https://shop.example/a?password=Pg-pw-77", "https://shop.example/a"):
        pages = [{"url": first, "fingerprint": 1, "scope": "s", "canonical_url": None},
                 {"url": first + "&b", "fingerprint": 1, "scope": "s", "canonical_url": first, "distance": 0}]
        for fmt in ("jsonl", "csv", "html"):
            document = render_report(build_clusters(pages, max_distance=3), fmt, {"source": first})
            assert "Pg-pw-77" not in document and "shop.example/a" in document, (fmt, document[-500:])
        changes = page_changes_csv([{"change": "new", "url": first, "scope": "s", "previous_fingerprint": None,
                                     "fingerprint": "01", "distance": None, "status": 200}])  # fmt: skip
        assert "Pg-pw-77" not in changes and "shop.example/a" in changes
    for text in (url, "PASSWORD=x", "ssl_paSSword: y", "paſſword=z", "a@b", "https://shop.example/a", "plain"):
        assert may_hold_password(text) or redact(text) == text

    for error in (NearDuplicate(url, other, 2, "simhash"), NearDuplicateItem(url, other, 2),
                  PredictedDuplicate(url, other, "rule"), UncheckedPage(url, "down")):  # fmt: skip
        assert "Pg-pw-77" not in str(error) and masked in str(error), str(error)
        assert error.url == url


def test_compare_shows_fetched_urls_without_their_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """compare's table and JSON name each page by the URL typed, masked (the fetch itself is replaced here:
    compare's crawler cannot load a handler that takes user information, see tests/e2e/test_secrets.py)."""
    import io
    from types import SimpleNamespace

    from conftest import article_html, article_words
    from simhash_scrapy.commands import compare

    typed = ["https://bob:Cmp-pw-55@shop.example/a", "https://bob:Cmp-pw-55@shop.example/b"]
    html = article_html("Story", article_words(5)).encode("utf-8")

    def fetched(urls: list[str], settings: Any, process: Any = None) -> dict[str, Any]:
        return {url: compare.Page(source=url, url=url, body=html, encoding="utf-8", status=200,
                                  content_type="text/html") for url in urls}  # fmt: skip

    monkeypatch.setattr(compare, "_fetch", fetched)
    for as_json in (False, True):
        out = io.StringIO()
        opts = SimpleNamespace(pages=typed, features=3, diff_lines=5, json=as_json)
        assert compare.run_compare(opts, {}, stdout=out) == 0
        assert "Cmp-pw-55" not in out.getvalue() and "bob:***@shop.example/b" in out.getvalue()


# --------------------------------------------------------- a real redis-server
@pytest.fixture
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A redis-server with ``requirepass``, ACL users alice and bob, and a unix socket."""
    directory = tmp_path_factory.mktemp("redis-locked")
    server = RedisServer(directory, password=DEFAULT_PW,
                         extra_args=("--unixsocket", str(directory / "redis.sock"), "--unixsocketperm", "700")).start()
    server.socket = str(directory / "redis.sock")
    server.command("ACL", "SETUSER", "alice", "on", f">{ALICE_PW}", "~*", "&*", "+@all")
    server.command("ACL", "SETUSER", "bob", "on", f">{BOB_PW}", "~*", "&*", "+@all")
    try:
        yield server
    finally:
        server.stop()


def settings_forms(server: Any, password: str | None = None) -> dict[str, tuple[dict[str, Any], tuple[str, ...]]]:
    """Each form of giving the password: settings, and the strings that must never be printed."""
    host = f"127.0.0.1:{server.port}"
    default, alice, bob = (password or pw for pw in (DEFAULT_PW, ALICE_PW, BOB_PW))
    bob_encoded = quote(bob, safe="")
    return {
        "userinfo": ({"SIMHASH_REDIS_URL": f"redis://:{default}@{host}/0"}, (default,)),
        "user_and_password": ({"SIMHASH_REDIS_URL": f"redis://alice:{alice}@{host}/0"}, (alice,)),
        "percent_encoded": ({"SIMHASH_REDIS_URL": f"redis://bob:{bob_encoded}@{host}/0"}, (bob, bob_encoded)),
        "query": ({"REDIS_URL": f"redis://{host}/0?password={default}"}, (default,)),
        "redis_params": ({"REDIS_URL": f"redis://{host}/0", "REDIS_PARAMS": {"password": default}}, (default,)),
        "unix_query": ({"REDIS_URL": f"unix://{server.socket}?db=0&password={default}"}, (default,)),
        "unix_userinfo": ({"REDIS_URL": f"unix://:{default}@{server.socket}?db=0"}, (default,)),
    }


def assert_hidden(secrets: tuple[str, ...], *texts: str) -> None:
    for text in texts:
        for secret in secrets:
            assert secret not in text, (secret, text[-3000:])


@async_test
async def test_backend_errors_never_hold_the_password(locked_redis: Any) -> None:
    for name, (settings, secrets) in settings_forms(locked_redis, WRONG_PW).items():
        backend = make_backend(None, **settings)
        with pytest.raises(BackendError) as info:
            await backend.open("s")
        message = str(info.value)
        # A refused password says so (Redis is up: "start Redis" would send the user the wrong way), also on a
        # unix socket, where redis-py's asyncio client reports it as a ConnectionError.
        assert message.startswith("Redis at ") and REFUSED in message, (name, message)
        assert "refused the login: authentication failed" in message and "check the password" in message, message
        assert "Cannot reach" not in message and "start Redis" not in message, message
        assert_hidden(secrets + (WRONG_PW,), message, backend.settings.describe())
    # No password at all, to a server that wants one: the same advice
    backend = make_backend(None, REDIS_URL=f"redis://127.0.0.1:{locked_redis.port}/0")
    with pytest.raises(BackendError, match=r"^Redis at redis://127\.0\.0\.1:\d+/0 refused the login: "
                                           r"authentication failed \(AuthenticationError"):
        await backend.open("s")
    for name, (settings, secrets) in settings_forms(locked_redis).items():
        backend = make_backend(None, **settings)
        await backend.open("s")
        assert (await backend.check(PageRecord("https://e/1", 1, "s"))).outcome.value == "unique", name
        assert_hidden(secrets, backend.settings.describe())
        await backend.close()


def crawl(site: Any, settings: dict[str, Any], tmp_path: Path, name: str) -> tuple[int, str, str, str]:
    """A real crawl (``scrapy crawl pages``) of the site with these settings: return code, stdout, stderr, report."""
    import subprocess

    report = tmp_path / f"report-{name}.jsonl"
    args = ["-a", f"base={site.base}", "-a", "paths=/a0,/b0,/a1,/b1", "-s", "SIMHASH_BACKEND=redis",
            "-s", f"SIMHASH_REPORT_URI={report}", "-s", "SIMHASH_REDIS_PERSIST=True", "-s", "LOG_LEVEL=DEBUG"]
    for key, value in settings.items():
        args += ["-s", f"{key}={json.dumps(value) if isinstance(value, dict) else value}"]
    proc = subprocess.run(crawl_command(*args), cwd=PROJECT, env=crawl_env(), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr, report.read_text(encoding="utf-8") if report.exists() else ""


#: The forms of giving the password (``settings_forms``): a test each, so the crawls spread over the workers.
FORMS = ("userinfo", "user_and_password", "percent_encoded", "query", "redis_params", "unix_query", "unix_userinfo")


@pytest.mark.slow  # two crawls in subprocesses
@pytest.mark.parametrize("name", FORMS)
def test_crawls_with_a_wrong_and_a_right_password(serve: Any, locked_redis: Any, tmp_path: Path, name: str) -> None:
    site = serve(make_site(2))
    forms = settings_forms(locked_redis)
    settings, secrets = settings_forms(locked_redis, WRONG_PW)[name]
    code, out, err, report = crawl(site, settings, tmp_path, f"wrong-{name}")
    stats = parse_stats(err)
    assert code == 0 and stats["finish_reason"] == "simhash_error", (name, err[-3000:])
    dump = re.sub(r"['\"]\n\s+['\"]", "", err[err.rfind("Dumping Scrapy stats") :])  # the stats, lines joined
    assert "'simhash/error': 'BackendError: Redis at " in dump and REFUSED in dump, dump
    assert "authentication failed" in dump and "start Redis" not in dump, dump
    assert_hidden(secrets + (WRONG_PW,) + forms[name][1], out, err, report, json.dumps(stats))
    settings, secrets = forms[name]
    code, out, err, report = crawl(site, settings, tmp_path, f"right-{name}")
    stats = parse_stats(err)
    assert code == 0 and stats["finish_reason"] == "finished", (name, err[-3000:])
    assert stats["simhash/fingerprinted"] == 4 and "simhash/error" not in stats, (name, stats)
    assert "simhash: Redis backend at " in err and len(json.loads(report.splitlines()[0])["members"]) >= 2
    assert_hidden(secrets, out, err, report)
    if name == "userinfo":  # the start-up line names Redis with the password masked
        assert f"Redis backend at redis://:***@127.0.0.1:{locked_redis.port}/0" in err
    if name == "query":
        assert f"Redis backend at redis://127.0.0.1:{locked_redis.port}/0?password=***" in err


@pytest.mark.slow  # a crawl in a subprocess
def test_a_rediss_url_against_a_server_without_tls_keeps_the_password_hidden(
    serve: Any, locked_redis: Any, tmp_path: Path,
) -> None:
    # rediss:// against a server without TLS: the connection fails; the message keeps the password hidden.
    site = serve(make_site(2))
    url = f"rediss://:{DEFAULT_PW}@127.0.0.1:{locked_redis.port}/0"
    _code, out, err, report = crawl(site, {"SIMHASH_REDIS_URL": url}, tmp_path, "rediss")
    assert parse_stats(err)["finish_reason"] == "simhash_error" and "Cannot reach Redis at rediss://:***@" in err
    assert_hidden((DEFAULT_PW,), out, err, report)


@pytest.mark.slow  # a crawl and two report commands in subprocesses
@pytest.mark.parametrize("name", [form for form in FORMS if form != "redis_params"])
def test_report_command_never_prints_the_password(serve: Any, locked_redis: Any, tmp_path: Path, name: str) -> None:
    site = serve(make_site(2))
    forms = settings_forms(locked_redis)
    settings, _ = forms["userinfo"]
    assert crawl(site, settings, tmp_path, "data")[0] == 0  # kept (SIMHASH_REDIS_PERSIST) for the reports
    for password in (None, WRONG_PW):
        (settings, secrets) = settings_forms(locked_redis, password)[name]
        url = settings.get("SIMHASH_REDIS_URL") or settings["REDIS_URL"]
        out = tmp_path / f"{name}-{password}.html"
        proc = simhash("report", "--redis", url, "--key", "pages:simhash", "-o", str(out), cwd=tmp_path)
        written = out.read_text(encoding="utf-8") if out.exists() else ""
        if password is None:
            assert proc.returncode == 0 and "<html" in written, (name, proc.stderr)
        else:
            assert proc.returncode == 1 and REFUSED in proc.stderr, (name, proc.stderr)
        assert_hidden(secrets + forms[name][1], proc.stdout, proc.stderr, written)


@pytest.mark.slow  # a crawl and two report commands in subprocesses
def test_report_command_with_redis_params_never_prints_the_password(
    serve: Any, locked_redis: Any, tmp_path: Path,
) -> None:
    # REDIS_PARAMS from the settings (-s), the URL without a password.
    site = serve(make_site(2))
    settings, _ = settings_forms(locked_redis)["userinfo"]
    assert crawl(site, settings, tmp_path, "data")[0] == 0  # kept (SIMHASH_REDIS_PERSIST) for the reports
    for password in (None, WRONG_PW):
        (settings, secrets) = settings_forms(locked_redis, password)["redis_params"]
        proc = simhash("report", "--redis", "--spider", "pages", "-s", f"REDIS_URL={settings['REDIS_URL']}",
                       "-s", f"REDIS_PARAMS={json.dumps(settings['REDIS_PARAMS'])}", cwd=PROJECT, project=True)
        assert proc.returncode == (0 if password is None else 1), proc.stderr
        assert_hidden(secrets, proc.stdout, proc.stderr)


@pytest.mark.redis
@pytest_twisted.ensureDeferred
async def test_redis_dying_mid_crawl_logs_no_password(serve: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = RedisServer(tmp_path / "redis", password=DEFAULT_PW).start()
    site = serve(make_site(6))
    url = f"redis://127.0.0.1:{server.port}/0?password={DEFAULT_PW}"
    try:
        crawler = await run_crawl(
            RecordingSpider,
            {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": url,
             "TEST_REDIS_PID": server.process.pid, "TEST_KILL_AFTER": 3, "SIMHASH_REDIS_HEARTBEAT": 0.1,
             "DOWNLOADER_MIDDLEWARES": {f"{KillRedisMiddleware.__module__}.KillRedisMiddleware": 545}},
            start_urls=[site.url(f"/a{i}") for i in range(6)],
        )
    finally:
        server.stop()
    stats = crawler.stats.get_stats()
    assert stats["simhash/backend_errors"] >= 1 and stats["finish_reason"] == "finished"
    assert "Redis error" in caplog.text and "?password=***" in caplog.text
    assert_hidden((DEFAULT_PW,), caplog.text, repr(stats))
