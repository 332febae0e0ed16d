"""Cross-page template learning (core.cluster.sitetemplate) and the clustering rule's template-free step."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import article_words

from simhash_scrapy.core import _native

from simhash_scrapy.core.cluster.clustering import Clusterer, Outcome
from simhash_scrapy.core.features.features import feature_hashes, stable_hash64
from simhash_scrapy.core.features.fingerprint import fingerprint, simhash_from_features
from simhash_scrapy.core.cluster.sitetemplate import ARTICLE_DISTANCE, HostTemplates, host_of, line_hashes, plain_parts

#: A "most popular" box a host puts beside every article (14 lines, ~60 words).
CHROME = "\n".join(
    f"Most popular story number {n}: {' '.join(article_words(900 + n, 4))}" for n in range(14)
)


def text(seed: int, chrome: str = CHROME, words: int = 300) -> str:
    body = article_words(seed, words)
    paragraphs = "\n".join(" ".join(body[i : i + 30]) for i in range(0, len(body), 30))
    return f"{paragraphs}\n{chrome}" if chrome else paragraphs


def fp(value: str) -> int:
    return fingerprint(value)


def test_lines_repeated_across_articles_are_the_hosts_template() -> None:
    learner = HostTemplates()
    first, second = text(1), text(2)
    assert learner.check("news.example", fp(first), first) is None  # nothing learned yet
    # the second article shares the box with the first: its template-free text is the article alone
    assert learner.check("news.example", fp(second), second) == fp(text(2, chrome=""))
    third = text(3)
    assert learner.check("news.example", fp(third), third) == fp(text(3, chrome=""))


def test_copies_of_one_article_never_teach_that_the_article_is_template() -> None:
    learner = HostTemplates()
    page = text(1)
    copy = page + "\nPrinted from news.example"  # a print view: a few bits away
    assert (fp(page) ^ fp(copy)).bit_count() <= ARTICLE_DISTANCE
    assert learner.check("news.example", fp(page), page) is None
    assert learner.check("news.example", fp(copy), copy) is None
    # a third copy: its lines were only ever seen in this one article
    assert learner.check("news.example", fp(page), page) is None


def test_each_host_learns_its_own_template() -> None:
    learner = HostTemplates()
    for seed in (1, 2):
        page = text(seed)
        learner.check("a.example", fp(page), page)
    page = text(3)
    assert learner.check("b.example", fp(page), page) is None
    assert learner.check("a.example:8080", fp(page), page) is None  # another port is another host


def test_too_little_left_gives_no_template_free_fingerprint() -> None:
    learner = HostTemplates(min_tokens=30)
    for seed in (1, 2):
        page = text(seed)
        learner.check("news.example", fp(page), page)
    stub = text(3, words=20)  # 20 words of its own beside the box
    assert learner.check("news.example", fp(stub), stub) is None
    bytes_page = text(4).encode()  # the crawl passes the text as UTF-8 bytes: the same answer
    assert HostTemplates().check("x", 1, bytes_page) is None


def test_learning_is_deterministic_and_bounded() -> None:
    pages = [text(seed) for seed in range(1, 8)]
    answers = []
    for _ in range(2):
        learner = HostTemplates()
        answers.append([learner.check("news.example", fp(p), p) for p in pages])
    assert answers[0] == answers[1]
    small = HostTemplates(max_lines=5, max_articles=2)
    for p in pages:
        small.check("news.example", fp(p), p)
    assert len(small) == 5


def test_hosts_met_once_the_lines_are_full_cost_no_memory() -> None:
    """Once ``max_lines`` lines are remembered, hosts met for the first time make room for each other (the
    least recently useful are forgotten): the learner never grows past its bound, and a broad crawl of
    millions of hosts costs no memory."""
    import tracemalloc

    learner = HostTemplates(max_lines=40)
    for seed in (1, 2, 3):
        page = text(seed)
        learner.check("news.example", fp(page), page)
    assert len(learner) == 40
    pages = [text(seed, words=60) for seed in range(3, 13)]
    prints = [fp(page) for page in pages]
    learner.check("warm-up.example", prints[0], pages[0])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        answers = [learner.check(f"host{n}.example", prints[n % 10], pages[n % 10]) for n in range(5000)]
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert answers == [None] * 5000
    assert len(learner) <= 40
    assert grown < 64 * 1024  # the answers list (40 KB) and little else; ~350 bytes a host before


def test_junk_hosts_do_not_switch_learning_off_for_later_hosts() -> None:
    # Issue 37: 20,000 one-page hosts filled the lines and no later host learned anything.
    def learn(learner: HostTemplates, host: str) -> list[int | None]:
        box = [f"Most read {n} {' '.join(article_words(7000 + n, 8))}" for n in range(6)]
        answers = []
        for seed in range(1, 7):
            page = "\n".join([*(" ".join(article_words(seed, 300)[i : i + 25]) for i in range(0, 300, 25)), *box])
            answers.append(learner.check(host, fp(page), page))
        return answers

    fresh = learn(HostTemplates(max_lines=2_000), "news.example")
    assert sum(a is not None for a in fresh) >= 4
    learner = HostTemplates(max_lines=2_000)
    useful = learn(learner, "useful.example")  # a host whose template matched: kept while junk comes
    # One-page hosts of 40 random words each, drawn from one seeded stream (an article_words call each,
    # which shuffles its 5,000-word vocabulary, took 17 of this test's 18 s of CPU).
    rng = random.Random(20_000)
    vocabulary = article_words(20_000, 5_000)
    for n in range(20_000):
        page = " ".join(rng.choices(vocabulary, k=40))
        learner.check(f"junk{n}.example", fp(page), page)
    assert len(learner) <= 2_000
    assert learn(learner, "news.example") == fresh  # a later host learns as on a fresh learner
    assert useful == fresh


def test_host_of() -> None:
    assert host_of("https://User:secret@News.Example/a?b") == "news.example"
    assert host_of("http://127.0.0.1:8081/x") == "127.0.0.1:8081"
    assert host_of("http://example.com:port/") == ""


def test_host_of_fast_path_is_urlsplits_host() -> None:
    """The usual URL skips urlsplit (a regular expression): the same host as urlsplit gives, on odd URLs too."""
    from urllib.parse import urlsplit

    def by_urlsplit(url: str) -> str:
        try:
            parts = urlsplit(url)
            host, port = (parts.hostname or "").lower(), parts.port
        except ValueError:
            return ""
        return f"{host}:{port}" if port is not None else host

    rng = random.Random(7)
    alphabet = "aB.-/:?#@[]%\t\n xY0\u00e9\\;=&"
    urls = ["https://Www.Example.COM", "http://a.b?x", "https://a.b#f", "https://a.b\n/", "HTTPS://A.B/", "https://",
            "https:///x", "https://a.b\\c", "https://-/", "https://a.b./", "http://xn--bcher-kva.example/"]
    urls += [rng.choice(["https://", "http://", "HTTP://", "https:/", " https://"])
             + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(20000)]
    assert [host_of(url) for url in urls] == [by_urlsplit(url) for url in urls]
    # (host, path, query) of the plain ones, as views.address_of reads them
    starts = ["", "x/", "?", "#", "?q=1", "#?q", "?a#b", "\t", "%2F", "//"]
    urls += ["https://a.b/" + rng.choice(starts) + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(20000)]
    plain = [(url, plain_parts(url)) for url in urls]
    assert sum(parts is not None for _, parts in plain) > 10000
    assert all(parts == (by_urlsplit(url), urlsplit(url).path, urlsplit(url).query) for url, parts in plain if parts)


def test_a_page_is_found_by_its_template_free_fingerprint() -> None:
    clusters = Clusterer(max_distance=4)
    article = fp(text(1, chrome=""))
    in_template = fp(text(1))
    assert (article ^ in_template).bit_count() > 4
    assert clusters.check("s", "original", article).outcome is Outcome.UNIQUE
    # without its template-free fingerprint the copy in another site's template is missed
    assert clusters.check("s", "plain", in_template, index=False).outcome is Outcome.UNIQUE
    found = clusters.check("s", "syndicated", in_template, also=article ^ 0b11)
    assert found.outcome is Outcome.NEAR_DUPLICATE and found.canonical == 0 and found.distance == 2


def test_a_canonical_page_is_found_by_its_template_free_fingerprint() -> None:
    clusters = Clusterer(max_distance=4)
    article = fp(text(1, chrome=""))
    in_template = fp(text(1))
    first = clusters.check("s", "syndicated", in_template, also=article)
    assert first.outcome is Outcome.UNIQUE
    assert clusters.index_size() == 1  # one canonical page, indexed under two fingerprints
    later = clusters.check("s", "original", article ^ 0b1)
    assert later.outcome is Outcome.NEAR_DUPLICATE and later.canonical == first.entry and later.distance == 1
    # the page changes: both of its rows leave the index
    assert clusters.check("s", "syndicated", fp(text(5))).outcome is Outcome.CHANGED
    assert clusters.index_size() == 1
    # its old template-free row is gone too: the article text finds nothing now
    assert clusters.check("s", "other", article ^ 0b1).outcome is Outcome.UNIQUE
    assert clusters.check("s", "short", 7, exact=True, also=article).outcome is Outcome.UNIQUE  # exact: no also


class StraightforwardTemplates:
    """The learner spelled out (one Python step a line, the page's text left tokenised anew): the
    specification a faster ``HostTemplates`` must match, decision for decision."""

    def __init__(self, max_lines: int, max_articles: int) -> None:
        self.max_lines, self.max_articles = max_lines, max_articles
        self.hosts: dict[str, tuple[list[int], dict[int, int]]] = {}
        self.count = 0

    def check(self, host: str, fingerprint: int, text: str | bytes) -> int | None:
        articles, known = self.hosts.setdefault(host, ([], {}))
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        lines = [stripped for line in data.split(b"\n") if (stripped := line.strip())]
        # Full: forget the hosts least recently useful (a template-free answer), else first seen, until the
        # page's lines fit (its non-blank lines: what a restored crawl's replay of the learner knows of a page).
        while self.count + len(lines) > self.max_lines and len(self.hosts) > 1:
            oldest = next(name for name in self.hosts if name != host)
            self.count -= len(self.hosts.pop(oldest)[1])
        article = next((n for n, o in enumerate(articles) if (fingerprint ^ o).bit_count() <= ARTICLE_DISTANCE), None)
        if article is None:
            article = len(articles) if len(articles) < self.max_articles else self.max_articles
            if article < self.max_articles:
                articles.append(fingerprint)
        kept = []
        for line in lines:
            seen = known.get(hash(line))
            if seen is None:
                kept.append(line)
                if self.count < self.max_lines:
                    known[hash(line)] = article << 32
                    self.count += 1
                continue
            second = (seen & 0xFFFFFFFF) - 1
            if (seen >> 32) == article and (second == -1 or second == article):
                kept.append(line)
            elif second == -1:
                known[hash(line)] = seen | (article + 1)
        if len(kept) == len(lines):
            return None
        self.hosts[host] = self.hosts.pop(host)
        hashes, weights, tokens = feature_hashes(b"\n".join(kept), with_token_count=True)
        if tokens < 30:
            return None
        free = simhash_from_features(hashes, weights)
        return None if free == fingerprint else free


@pytest.mark.parametrize("compiled", [True, False], ids=["C", "pure"])
def test_the_learner_decides_as_the_straightforward_one_on_many_pages(compiled: bool) -> None:
    """Hundreds of pages of 3 hosts (shared boxes, copies of articles, repeated and blank lines, non-ASCII,
    text that is not content), str and bytes, with room for few lines and articles and with plenty: every
    template-free fingerprint is the straightforward learner's, and the two remember as many lines."""
    rng = random.Random(7)
    boxes = [[f"Box {b} line {n}: {' '.join(article_words(5000 + 40 * b + n, 5))}" for n in range(12)] for b in range(6)]
    boxes.append(["Source URL", ": http://box.example/a", "[12] http://box.example/b", "Printed on 12 May 2024"])
    pages = []
    for number in range(400):
        seed = rng.randrange(120)  # articles come back: copies and near copies
        body = article_words(seed, rng.randrange(20, 300))
        lines = [" ".join(body[i : i + 25]) for i in range(0, len(body), 25)]
        if rng.random() < 0.3:
            lines.insert(rng.randrange(len(lines) + 1), f"edited {number} \u2014 d\u00e9j\u00e0 vu \u65e5\u672c\u8a9e")
        for box in rng.sample(boxes, rng.randrange(3)):
            lines.extend(rng.sample(box, rng.randrange(1, len(box))))
        lines += [lines[0], "", "   \t"] if rng.random() < 0.2 else []
        if rng.random() < 0.1:
            rng.shuffle(lines)
        page = "\n".join(f"  {line} " for line in lines)
        host = rng.choice(("a.example", "b.example", "c.example:8080"))
        pages.append((host, fp(page), page.encode() if rng.random() < 0.5 else page))
    for max_lines, max_articles in ((150, 4), (2_000, 20), (200_000, 64)):
        learner = HostTemplates(max_lines=max_lines, max_articles=max_articles)
        reference = StraightforwardTemplates(max_lines, max_articles)
        with _native.switched(compiled):
            answers = [learner.check(*page) for page in pages]
        assert answers == [reference.check(*page) for page in pages]
        assert len(learner) == reference.count
        assert sum(a is not None for a in answers) > 20  # the learner did find templates


def test_a_lines_digest_is_its_stable_hash_in_every_process() -> None:
    """The learner keys a line by ``stable_hash64`` of its stripped UTF-8 bytes (no per-process seed), also
    on a text longer than the tokeniser's chunk (1 MB)."""
    page = "  Most read \t\n\n caf\u00e9 \u2014 \u65e5\u672c\r\n\x0bx\x0c\n\x1c"
    expected = [stable_hash64(line) for line in (b"Most read", "caf\u00e9 \u2014 \u65e5\u672c".encode(), b"x", b"\x1c")]
    assert line_hashes(page) == line_hashes(page.encode()) == expected
    long_text = "\n".join(f"line {n} {'words ' * 10}" for n in range(25_000))
    assert len(long_text) > 1 << 20
    digests = line_hashes(long_text)
    assert len(digests) == 25_000
    assert all(digests[n] == stable_hash64(f"line {n} {'words ' * 10}".strip().encode()) for n in range(0, 25_000, 997))


@pytest.mark.slow  # 3,000 examples: 3 s (CONTRIBUTING.md, "Tests": 2 s or more is slow)
@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(["https://", "http://", "HTTP://", "hTTps://", "https:/", " https://", "\x00http://", "http:\\\\"]),
       st.text(st.sampled_from(list("aZ.-/:?#@[]%\t\n\r \x00\x1f\x7f\\;=&0\u00e9\u00df\u0130\u212a\u3002\uff0e\u2028")), max_size=16))
def test_plain_parts_are_urlsplits_on_control_characters_and_look_alikes(scheme: str, rest: str) -> None:
    """``plain_parts`` and ``host_of``'s fast path against urlsplit (what both read before), on what urlsplit
    strips or rejects (tab, CR, LF, a leading NUL or space), upper-case schemes and non-ASCII look-alikes
    (the Kelvin sign lower-cases to k, U+0130 to two characters, the ideographic full stop): the same host,
    path and query, so the same scope and address (``views.address_of``) on every code path."""
    from urllib.parse import urlsplit

    url = scheme + rest
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
        expected = f"{host}:{port}" if port is not None else host
    except ValueError:
        parts, expected = None, ""
    assert host_of(url) == expected
    plain = plain_parts(url)
    if plain is not None:
        assert parts is not None and plain == (expected, parts.path, parts.query)
