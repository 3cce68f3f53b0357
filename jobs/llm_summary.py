"""Stage llm_summary: one call per article (pretend a local LLM summarises it)."""

from minikafka.job import main
from schemas.homelab import RssItem, Summary


def row_fn(item: RssItem) -> Summary:
    sentences = [s.strip() for s in item.body.split(".") if s.strip()]
    summary = ". ".join(sentences[:2]) + ("." if sentences else "")
    return Summary(url=item.url, title=item.title, kind="article", summary=summary[:200],
                   words=len(item.body.split()), published=item.published)


if __name__ == "__main__":
    raise SystemExit(main())
