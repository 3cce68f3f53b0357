"""Models of one topic before and after its schema changed (importable by child processes)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class Reading(BaseModel):
    sensor: str
    value: int


class ReadingV2(BaseModel):
    """Reading plus optional fields and one with a default: an additive change."""

    sensor: str
    value: int
    unit: str | None = None
    calibrated: bool = False
    seen_at: datetime | None = None


class ReadingRetyped(BaseModel):
    """value changes type: a rewrite."""

    sensor: str
    value: float


class ReadingRequired(BaseModel):
    """A new field with no default and not Optional: old rows would have no value."""

    sensor: str
    value: int
    unit: str


class ReadingOpen(BaseModel):
    """Takes extra fields."""

    model_config = ConfigDict(extra="allow")

    sensor: str
    value: int
