"""UTC timestamps as the ledger stores them: fixed-width ISO 8601 text with microseconds."""

from __future__ import annotations

from datetime import datetime, timezone

TIMESTAMP_GLOB = (
    "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]"
    ".[0-9][0-9][0-9][0-9][0-9][0-9]Z"
)
DATE_GLOB = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"


def format_timestamp(value: datetime) -> str:
    """Render a datetime as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC.

    Naive datetimes are taken to be UTC already (documented in README).
    """
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds") + "Z"


def parse_timestamp(text: str | None) -> datetime | None:
    """Inverse of format_timestamp: an aware UTC datetime (None stays None)."""
    if text is None:
        return None
    return datetime.fromisoformat(text)


def utc_now() -> str:
    """The current time in the ledger's text form."""
    return format_timestamp(datetime.now(timezone.utc))
