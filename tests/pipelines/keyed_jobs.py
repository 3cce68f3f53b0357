"""Models and jobs of the keyed-table pipelines in the tests (``[tables]``, a stage writing into one)."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel


class Flight(BaseModel):
    flight_id: str
    carrier: str
    day: date
    delay: int


class CarrierDay(BaseModel):
    carrier: str
    day: date
    flights: int
    max_delay: int


def transform(df):
    """One row per flight: the table's merge (sum, max) does the aggregation."""
    from pyspark.sql import functions as F

    return df.select("carrier", "day", F.lit(1).cast("long").alias("flights"), F.col("delay").alias("max_delay"))


class Version(BaseModel):
    """A version of ``carrier_day`` as a downstream stage read it."""

    carrier: str
    day: date
    flights: int
    max_delay: int
