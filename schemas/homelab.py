"""Models of the shipped homelab pipeline: RSS items -> (YouTube, articles) -> summaries -> scored."""

from __future__ import annotations

from datetime import datetime
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
