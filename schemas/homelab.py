"""Models of the shipped homelab pipeline: RSS items -> (YouTube, articles) -> summaries -> scored,
and items per feed per day (a keyed table)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, Field


class RssItem(BaseModel):
    """One entry pulled from a feed (also the model of the YouTube and article topics)."""

    url: str = Field(min_length=8, pattern=r"^https?://")
    feed: str
    title: str = Field(min_length=1)
    body: str
    published: datetime


class Summary(BaseModel):
    url: str
    title: str
    kind: Literal["video", "article"]
    summary: str
    words: int = Field(ge=0)
    published: datetime


class Scored(BaseModel):
    url: str
    title: str
    kind: Literal["video", "article"]
    score: float
    category: Literal["must-read", "maybe", "skip"]
    published: datetime


class FeedDay(BaseModel):
    """Items per feed per day: one current row per (feed, day) in the keyed table rss.feed_day."""

    feed: str
    day: date
    items: int = Field(ge=0)
