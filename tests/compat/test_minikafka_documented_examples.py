"""minikafka's documented examples (front page, quickstart, topics, pipelines, fan-out pages)
run on our package as written.

Each snippet is kept as the documentation gives it and executed; where a page shows a
fragment, the test prepares the names the fragment uses (topics, functions) around it.
Where the documentation itself does not run on minikafka (``...`` placeholders, a
``source.topic`` call without the required ``dedup``), the test says so next to the fix.
"""

from __future__ import annotations

import textwrap

import pytest
from pydantic import BaseModel

import minikafka
from minikafka import DuplicateMessageError, FanOutError, Source


def run(code: str, namespace: dict | None = None) -> dict:
    namespace = {} if namespace is None else namespace
    exec(compile(textwrap.dedent(code), "<minikafka docs>", "exec"), namespace)
    return namespace


FRONT_PAGE_TOUR = '''
from pydantic import BaseModel
from minikafka import Source


class RssItem(BaseModel):
    url: str
    title: str
    body: str


class Summary(BaseModel):
    url: str
    title: str
    llm_summary: str


def llm_summary(item: RssItem) -> Summary:
    # pretend this calls a local model
    return Summary(
        url=item.url,
        title=item.title,
        llm_summary=item.body[:200] + "...",
    )


with Source("homelab.sqlite") as source:  # one file on disk, survives restarts
    items = source.topic("rss.items", RssItem, dedup=("url",))
    summaries = source.topic("rss.summaries", Summary, dedup=("url",))

    items.append({
        "url": "https://example.com/post-1",
        "title": "Hello, homelab",
        "body": "A long post about running things at home...",
    })

    items.pipe(llm_summary).to(summaries).run()

    for s in summaries.iter_new():
        print(s.title, "->", s.llm_summary)
'''


def test_front_page_tour_runs_and_a_second_run_meets_the_dedup(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run(FRONT_PAGE_TOUR)
    assert capsys.readouterr().out == "Hello, homelab -> A long post about running things at home......\n"
    with pytest.raises(DuplicateMessageError):  # as in minikafka: append raises on a seen URL
        run(FRONT_PAGE_TOUR)
    with Source(tmp_path / "homelab.sqlite") as source:
        assert source.topics() == ["rss.items", "rss.summaries"]


class Item(BaseModel):
    url: str
    body: str


class Summary(BaseModel):
    url: str
    text: str


class Scored(BaseModel):
    url: str
    score: int


def test_front_page_going_bigger_fan_out_and_fan_in():
    with Source(":memory:") as source:
        ns = {
            "source": source,
            "items": source.topic("items", Item, dedup=("url",)),
            "youtube_items": source.topic("youtube_items", Item, dedup=("url",)),
            "article_items": source.topic("article_items", Item, dedup=("url",)),
            "summaries": source.topic("summaries", Summary, dedup=("url",)),
            "scored": source.topic("scored", Scored, dedup=("url",)),
            "split_youtube": lambda i: i if "youtube" in i.url else None,
            "keep_articles": lambda i: None if "youtube" in i.url else i,
            "transcribe": lambda i: Summary(url=i.url, text="video: " + i.body),
            "llm_summary": lambda i: Summary(url=i.url, text=i.body[:10]),
            "score": lambda s: Scored(url=s.url, score=len(s.text)),
        }
        ns["items"].extend([{"url": "https://youtube.com/1", "body": "talk"},
                            {"url": "https://blog/1", "body": "a long article"}])
        run('''
        source.full_pipeline(
            items.pipe(split_youtube).to(youtube_items),
            items.pipe(keep_articles).to(article_items),
            youtube_items.pipe(transcribe).to(summaries),
            article_items.pipe(llm_summary).to(summaries),
            summaries.pipe(score).to(scored),
        ).run()
        ''', ns)
        assert sorted((s.url, s.score) for s in ns["scored"].iter_new()) == [
            ("https://blog/1", 10), ("https://youtube.com/1", 11)]
        assert ns["items"].count("new") == 0
        plot = source.full_pipeline(
            ns["items"].pipe(ns["split_youtube"]).to(ns["youtube_items"]),
            ns["items"].pipe(ns["keep_articles"]).to(ns["article_items"]),
            ns["youtube_items"].pipe(ns["transcribe"]).to(ns["summaries"]),
            ns["article_items"].pipe(ns["llm_summary"]).to(ns["summaries"]),
            ns["summaries"].pipe(ns["score"]).to(ns["scored"]),
        ).plot()
    assert plot == textwrap.dedent('''\
        graph TD
            items --> youtube_items
            items --> article_items
            youtube_items --> summaries
            article_items --> summaries
            summaries --> scored''')


QS_MODEL = """
from pydantic import BaseModel

class Video(BaseModel):
    creator: str
    url: str
    length_seconds: int
"""

QS_OPEN = """
from minikafka import Source

with Source(":memory:") as source:  # or a path to a .sqlite file
    videos = source.topic("videos", Video, dedup=("url",))
"""

QS_APPEND = """
videos.append({"creator": "example", "url": "https://x/1", "length_seconds": 90})
videos.append(Video(creator="example", url="https://x/2", length_seconds=120))
"""

QS_MANUAL_LOOP = """
for record in videos.iter_new(records=True):
    print(record.id, record.created_at, record.data.creator)
    videos.set_handled(record=record)
"""

QS_PIPELINE = """
class Cleaned(BaseModel):
    creator: str
    url: str
    duration_min: int


cleaned = source.topic("cleaned", Cleaned, dedup=("url",))


def clean(v: Video) -> Cleaned:
    return Cleaned(
        creator=v.creator.strip().lower(),
        url=v.url,
        duration_min=v.length_seconds // 60,
    )


videos.pipe(clean).to(cleaned).run()

for item in cleaned.iter_new():
    print(item)
"""

QS_EVENTS = """
def log(event, **kwargs):
    print(event, kwargs)


with Source(":memory:", on_event=log) as source:
    ...
"""


def quickstart(*sections: str) -> str:
    """The page's sections 1-2, then the given sections inside its ``with`` block (as the page says)."""
    body = "".join(textwrap.indent(textwrap.dedent(section), "    ") for section in sections)
    return textwrap.dedent(QS_MODEL) + textwrap.dedent(QS_OPEN) + body


def test_quickstart_runs_as_written(capsys):
    ns = run(quickstart(QS_APPEND, QS_MANUAL_LOOP, QS_PIPELINE) + textwrap.dedent(QS_EVENTS))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["1", "2"]  # acked by hand: nothing left for the pipeline
    with Source(":memory:", on_event=ns["log"]) as source:
        videos = source.topic("videos", ns["Video"], dedup=("url",))
        videos.append({"creator": "example", "url": "https://x/1", "length_seconds": 90})
        with pytest.raises(DuplicateMessageError):  # "A second insert with the same url raises"
            videos.append({"creator": "example", "url": "https://x/1", "length_seconds": 90})
    assert capsys.readouterr().out.splitlines() == [
        "topic_created {'name': 'videos', 'model': 'Video', 'dedup': ('url',)}",
        "message_appended {'topic': 'videos', 'payload': "
        "{'creator': 'example', 'url': 'https://x/1', 'length_seconds': 90}}",
    ]


def test_quickstart_pipeline_section_consumes_the_appended_rows(capsys):
    run(quickstart(QS_APPEND, QS_PIPELINE, "assert videos.count('handled') == 2\n"))
    assert capsys.readouterr().out.splitlines() == [
        "creator='example' url='https://x/1' duration_min=1",
        "creator='example' url='https://x/2' duration_min=2",
    ]


class CleanedV1(BaseModel):
    creator: str
    url: str
    duration_min: int


def test_topics_page_dedup_migration_and_polars_export():
    with Source(":memory:") as source:
        ns = {"source": source, "Video": CleanedV1, "BaseModel": BaseModel, "CleanedV1": CleanedV1,
              "DuplicateMessageError": DuplicateMessageError}
        # the page elides the other fields with ``...``, which is not Python: filled in here
        run('''
        videos = source.topic("videos", Video, dedup=("url",))
        videos.append({"url": "https://x/1", "creator": "a", "duration_min": 1})
        try:
            videos.append({"url": "https://x/1", "creator": "b", "duration_min": 2})  # -> DuplicateMessageError
        except DuplicateMessageError:
            raised = True
        ''', ns)
        assert ns["raised"]
        ns["cleaned_v1"] = source.topic("cleaned", CleanedV1, dedup=("url",))
        ns["cleaned_v1"].append({"creator": "a", "url": "u", "duration_min": 3})
        run('''
        class CleanedV2(BaseModel):
            creator: str
            url: str
            duration_min: int
            quality: str = "unknown"


        def upgrade(old: CleanedV1) -> CleanedV2:
            return CleanedV2(**old.model_dump(), quality="unknown")


        cleaned_v2 = cleaned_v1.migrate(CleanedV2, upgrade)

        df = videos.to_polars()
        ''', ns)
        assert [c.quality for c in ns["cleaned_v2"].iter_new()] == ["unknown"]
        assert ns["df"].shape == (1, 3) and ns["df"]["url"].to_list() == ["https://x/1"]


class Sum(BaseModel):
    value: int


def test_pipelines_page_runs_dry_runs_plots_and_targets_by_name(capsys):
    with Source(":memory:") as source:
        ns = {"source": source, "Sum": Sum, "clean": lambda v: {"creator": v.creator, "url": v.url, "duration_min": 1}}
        ns["videos"] = source.topic("videos", CleanedV1, dedup=("url",))
        ns["cleaned"] = source.topic("cleaned", CleanedV1, dedup=("url",))
        ns["videos"].extend([{"creator": "a", "url": f"u{i}", "duration_min": 60} for i in range(3)])
        run('''
        print(videos.pipe(clean).to(cleaned).plot())
        videos.pipe(clean).to(cleaned).run(dry_run=True)
        videos.pipe(clean).to(cleaned).run()
        videos.pipe(clean).to("cleaned").run()
        ''', ns)
        assert capsys.readouterr().out == "graph TD\n    videos --> cleaned\n"
        assert ns["cleaned"].count() == 3 and ns["videos"].count("new") == 0
        # the page calls source.topic("sums", Sum) without dedup: minikafka raises TypeError too
        with pytest.raises(TypeError, match="dedup"):
            run('sums = source.topic("sums", Sum).pipe(lambda x: x.value).run()', ns)
        source.topic("sums", Sum, dedup=None).extend([{"value": 1}, {"value": 2}])
        run('sums = source.topic("sums", Sum, dedup=None).pipe(lambda x: x.value).run()', ns)
        assert ns["sums"] == [1, 2]
        with pytest.raises(KeyError):
            ns["videos"].pipe(ns["clean"]).to("never_created")


def test_fan_out_page_dag_strategies_and_cycles(capsys):
    with Source(":memory:") as source:
        names = ["raw_yt", "raw_blog", "raw_hn", "clean_yt", "clean_blog_t", "clean_hn_t", "feed", "filtered_feed"]
        ns = {"source": source, "FanOutError": FanOutError}
        for n in names:
            ns[n] = source.topic(n, Item, dedup=("url",))
        for n in ("raw_yt", "raw_blog", "raw_hn"):
            ns[n].extend([{"url": f"{n}/{i}", "body": "x" * i} for i in range(3)])
        ns.update(clean_youtube=lambda i: i, clean_blog=lambda i: i, clean_hn=lambda i: i, to_feed=lambda i: i,
                  score_filter=lambda i: i if len(i.body) > 1 else None)
        run('''
        source.full_pipeline(
            raw_yt.pipe(clean_youtube).to(clean_yt),
            raw_blog.pipe(clean_blog).to(clean_blog_t),
            raw_hn.pipe(clean_hn).to(clean_hn_t),
            clean_yt.pipe(to_feed).to(feed),
            clean_blog_t.pipe(to_feed).to(feed),
            clean_hn_t.pipe(to_feed).to(feed),
            feed.pipe(score_filter).to(filtered_feed),
        ).run()
        ''', ns)
        assert ns["feed"].count() == 9 and ns["filtered_feed"].count() == 3

        ns["raw_yt"].append({"url": "raw_yt/bad", "body": "!"})

        def flaky(i):
            if i.url.endswith("bad"):
                raise RuntimeError("flaky LLM")
            return i

        ns["flaky"] = flaky
        # the page passes ``...`` as the arms; real arms here
        run('''
        try:
            source.full_pipeline(raw_yt.pipe(flaky).to(clean_yt)).run(strategy="best_effort")
        except FanOutError as exc:
            for failure in exc.failures:
                print(failure.source, "->", failure.target, failure.exception)
        ''', ns)
        assert capsys.readouterr().out == "raw_yt -> clean_yt flaky LLM\n"
        assert [r.url for r in ns["raw_yt"].iter_new()] == ["raw_yt/bad"]

        with pytest.raises(ValueError, match="pipeline contains a cycle"):
            source.full_pipeline(ns["feed"].pipe(to_feed := ns["to_feed"]).to(ns["raw_hn"]),
                                 ns["raw_hn"].pipe(to_feed).to(ns["feed"])).run()


def test_the_public_names_minikafka_exports_all_exist():
    for name in ["DuplicateMessageError", "FanOutError", "FanOutFailure", "FullPipeline", "MinikafkaError",
                 "Pipeline", "Record", "SchemaMismatchError", "Source", "Topic"]:
        assert name in minikafka.__all__ and hasattr(minikafka, name)
