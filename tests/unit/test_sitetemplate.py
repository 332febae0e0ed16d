"""Cross-page template learning (core.sitetemplate) and the clustering rule's template-free step."""

from __future__ import annotations

from conftest import article_words

from simhash_scrapy.core.clustering import Clusterer, Outcome
from simhash_scrapy.core.fingerprint import fingerprint
from simhash_scrapy.core.sitetemplate import ARTICLE_DISTANCE, HostTemplates, host_of

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


def test_host_of() -> None:
    assert host_of("https://User:secret@News.Example/a?b") == "news.example"
    assert host_of("http://127.0.0.1:8081/x") == "127.0.0.1:8081"
    assert host_of("http://example.com:port/") == ""


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
