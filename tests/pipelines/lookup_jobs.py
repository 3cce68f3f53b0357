"""Models and jobs of the lookup pipelines in the tests (flights joined to airlines)."""

from __future__ import annotations

from pydantic import BaseModel


class Flight(BaseModel):
    flight_id: int
    carrier: str


class Airline(BaseModel):
    carrier: str
    name: str


class Enriched(BaseModel):
    flight_id: int
    carrier: str
    airline: str | None = None


def transform(frames):
    """Each new flight with its airline's name (a left join: no airline yet gives null)."""
    flights, airlines = frames["flights"], frames["airlines"]
    return (flights.join(airlines.withColumnRenamed("name", "airline"), "carrier", "left")
            .select("_id", "flight_id", "carrier", "airline"))
