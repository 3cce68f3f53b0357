"""Helpers shared by the example jobs."""

from pyspark.sql import functions as F

YOUTUBE = r"^https?://(www\.)?(youtube\.com/watch|youtu\.be/)"
ITEM_COLUMNS = ["_id", "url", "feed", "title", "body", "published"]


def is_youtube():
    return F.col("url").rlike(YOUTUBE)
