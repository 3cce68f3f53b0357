"""Stage keep_articles: RSS items that are regular articles."""

from jobs._rss import ITEM_COLUMNS, is_youtube
from minikafka.job import main


def transform(df):
    return df.where(~is_youtube()).select(*ITEM_COLUMNS)


if __name__ == "__main__":
    raise SystemExit(main())
