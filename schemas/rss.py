"""Models of the example homelab RSS pipeline (minikafka's tour)."""

from __future__ import annotations

from pydantic import BaseModel


class RssItem(BaseModel):
    url: str
    title: str
    body: str


class Summary(BaseModel):
    url: str
    title: str
    llm_summary: str
