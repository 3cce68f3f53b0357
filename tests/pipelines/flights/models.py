"""Models of the flights test pipeline: raw flights -> clean | cancelled -> enriched -> carrier_day."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel


class Flight(BaseModel):
    """One departure as the nightly dump has it (a cancelled flight has no dep_delay)."""

    flight_id: str
    carrier: str
    origin: str
    day: date
    hour: int
    dep_delay: float | None = None


class Airline(BaseModel):
    carrier: str
    name: str


class Weather(BaseModel):
    """The weather at an origin airport in one hour of one day."""

    origin: str
    day: date
    hour: int
    temp: float
    wind_speed: float


class Enriched(BaseModel):
    flight_id: str
    carrier: str
    airline: str | None = None  # None: the airline was not known when the flight was enriched
    origin: str
    day: date
    hour: int
    dep_delay: float
    temp: float | None = None
    wind_speed: float | None = None


class CarrierDay(BaseModel):
    """The per-carrier daily average: one current row per (carrier, day) in a keyed table."""

    carrier: str
    day: date
    flights: int
    avg_dep_delay: float
