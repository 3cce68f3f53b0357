"""Stage transcribe: one call per video (pretend it transcribes and summarises)."""

from minikafka.job import main
from schemas.homelab import RssItem, Summary


def row_fn(item: RssItem) -> Summary:
    transcript = f"[video by {item.feed}] {item.title}. {item.body}"
    return Summary(url=item.url, title=item.title, kind="video", summary=transcript[:160],
                   words=len(transcript.split()), published=item.published)


if __name__ == "__main__":
    raise SystemExit(main())
