"""The snippets of minikafka's front page (seed 000) and quickstart (seed 001), run verbatim."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from minikafka import DuplicateMessageError

TOUR = textwrap.dedent('''
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

    with Source("homelab.sqlite") as source:   # one file on disk, survives restarts
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
''')


def run_script(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_ten_line_tour_runs_as_written_and_the_file_survives(tmp_path):
    first = run_script(TOUR, tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Hello, homelab -> A long post about running things at home......\n"
    conn = sqlite3.connect(tmp_path / "homelab.sqlite")
    assert conn.execute('SELECT "_status" FROM "rss.items:status"').fetchall() == [("handled",)]
    assert conn.execute('SELECT url, "_parent_id" FROM "rss.summaries"').fetchall() == [
        ("https://example.com/post-1", 1)
    ]


def test_tour_second_run_same_url_is_a_no_op_on_the_data(tmp_path):
    assert run_script(TOUR, tmp_path).returncode == 0
    again = run_script(TOUR, tmp_path)
    # quickstart: a second insert with the same url raises DuplicateMessageError ...
    assert again.returncode != 0 and "DuplicateMessageError" in again.stderr
    # ... and the tour's promise holds: nothing new was stored
    conn = sqlite3.connect(tmp_path / "homelab.sqlite")
    assert conn.execute('SELECT count(*) FROM "rss.items"').fetchone() == (1,)
    assert conn.execute('SELECT count(*) FROM "rss.summaries"').fetchone() == (1,)


def test_fan_out_fan_in_snippet_from_the_front_page(source):
    from pydantic import BaseModel

    class Item(BaseModel):
        url: str
        title: str
        body: str

    class Summary(BaseModel):
        url: str
        llm_summary: str

    class Scored(BaseModel):
        url: str
        score: int

    items = source.topic("items", Item, dedup=("url",))
    youtube_items = source.topic("youtube_items", Item, dedup=("url",))
    article_items = source.topic("article_items", Item, dedup=("url",))
    summaries = source.topic("summaries", Summary, dedup=("url",))
    scored = source.topic("scored", Scored, dedup=("url",))

    def split_youtube(i):
        return i if "youtube.com" in i.url else None

    def keep_articles(i):
        return None if "youtube.com" in i.url else i

    def transcribe(i):
        return Summary(url=i.url, llm_summary="transcript: " + i.title)

    def llm_summary(i):
        return Summary(url=i.url, llm_summary=i.body[:10])

    def score(s):
        return Scored(url=s.url, score=len(s.llm_summary))

    items.extend([
        {"url": "https://youtube.com/watch?v=1", "title": "video", "body": "b"},
        {"url": "https://blog.example/post", "title": "post", "body": "long article body"},
    ])
    pipeline = source.full_pipeline(
        items.pipe(split_youtube).to(youtube_items),
        items.pipe(keep_articles).to(article_items),
        youtube_items.pipe(transcribe).to(summaries),
        article_items.pipe(llm_summary).to(summaries),
        summaries.pipe(score).to(scored),
    )
    pipeline.run()
    assert pipeline.plot() == textwrap.dedent("""\
        graph TD
            items --> youtube_items
            items --> article_items
            youtube_items --> summaries
            article_items --> summaries
            summaries --> scored""")
    assert sorted((s.url, s.score) for s in scored.iter_new()) == [
        ("https://blog.example/post", 10),
        ("https://youtube.com/watch?v=1", 17),
    ]
    assert items.count("new") == 0 and summaries.count("handled") == 2


def test_quickstart_walkthrough(capsys):
    from pydantic import BaseModel

    from minikafka import Source

    class Video(BaseModel):
        creator: str
        url: str
        length_seconds: int

    events = []
    with Source(":memory:", on_event=events.append) as source:   # or a path to a .sqlite file
        videos = source.topic("videos", Video, dedup=("url",))

        videos.append({"creator": "example", "url": "https://x/1", "length_seconds": 90})
        videos.append(Video(creator="example", url="https://x/2", length_seconds=120))
        with pytest.raises(DuplicateMessageError, match="https://x/1"):
            videos.append({"creator": "other", "url": "https://x/1", "length_seconds": 1})

        for record in videos.iter_new(records=True):
            print(record.id, record.created_at, record.data.creator)
            record.ack()
        assert videos.count("handled") == 2 and videos.count("new") == 0

        videos.append({"creator": " Example ", "url": "https://x/3", "length_seconds": 150})

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

    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1 ") and out[0].endswith(" example")
    assert out[-1] == "creator='example' url='https://x/3' duration_min=2"
    names = [e.name for e in events]
    assert names[:2] == ["topic_created", "message_appended"]
    assert {"message_handled", "pipeline_start", "pipeline_end"} <= set(names)
