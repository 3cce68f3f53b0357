"""minikafka's 10-line RSS tour (seed 000), as a re-runnable script.

The only change from the seed: appends use ``on_duplicate="ignore"`` so running the
script again is the promised no-op instead of a DuplicateMessageError.

Usage: python scripts/tour.py [PATH]   (default: data/homelab.sqlite)
"""

from __future__ import annotations

import sys
from pathlib import Path

from minikafka import Source
from schemas.rss import RssItem, Summary


def llm_summary(item: RssItem) -> Summary:
    # pretend this calls a local model
    return Summary(url=item.url, title=item.title, llm_summary=item.body[:200] + "...")


def main(path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with Source(path) as source:
        items = source.topic("rss.items", RssItem, dedup=("url",))
        summaries = source.topic("rss.summaries", Summary, dedup=("url",))
        items.append(
            {
                "url": "https://example.com/post-1",
                "title": "Hello, homelab",
                "body": "A long post about running things at home...",
            },
            on_duplicate="ignore",
        )
        items.pipe(llm_summary).to(summaries).run()
        for s in summaries.iter_new():
            print(s.title, "->", s.llm_summary)
        print(source.full_pipeline(items.pipe(llm_summary).to(summaries)).plot(counts=True))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/homelab.sqlite")
