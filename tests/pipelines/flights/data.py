"""Deterministic nightly dumps shaped like nycflights13 (a few hundred rows).

Night ``n`` brings the flights of day ``n`` and that day's weather, with these twists:

- some flights of earlier days arrive late, on a later night (their weather arrived on time);
- some rows of a night are sent again the next night (the clean stage drops them);
- a few flights are cancelled (no ``dep_delay``);
- the airline ``LATE_CARRIER`` is first sent on night 2, after its first flights (night 1).
"""

from __future__ import annotations

import random
from datetime import date, timedelta

NIGHTS = 3
FIRST_DAY = date(2013, 1, 1)
ORIGINS = ("EWR", "JFK", "LGA")
AIRLINES = {"AA": "American Airlines Inc.", "B6": "JetBlue Airways", "DL": "Delta Air Lines Inc.",
            "EV": "ExpressJet Airlines Inc.", "UA": "United Air Lines Inc.", "OO": "SkyWest Airlines Inc."}
LATE_CARRIER = "OO"
FLIGHTS_PER_DAY = 70


def day_of(night: int) -> date:
    return FIRST_DAY + timedelta(days=night - 1)


def nights(seed: int = 41) -> dict[int, dict[str, list[dict]]]:
    """``{night: {"flights": [...], "airlines": [...], "weather": [...]}}``, rows as JSON-ready dicts
    (dates as ISO strings), the same for the same seed."""
    rnd = random.Random(seed)
    out: dict[int, dict[str, list[dict]]] = {n: {"flights": [], "airlines": [], "weather": []}
                                            for n in range(1, NIGHTS + 1)}
    carriers = sorted(AIRLINES)
    for n in range(1, NIGHTS + 1):
        day = day_of(n)
        for origin in ORIGINS:
            for hour in range(24):
                out[n]["weather"].append({"origin": origin, "day": day.isoformat(), "hour": hour,
                                          "temp": round(rnd.uniform(20, 45), 1),
                                          "wind_speed": round(rnd.uniform(0, 25), 1)})
        for i in range(FLIGHTS_PER_DAY):
            carrier = carriers[i % len(carriers)]
            flight = {"flight_id": f"{day:%Y%m%d}-{carrier}-{i:03d}", "carrier": carrier,
                      "origin": ORIGINS[rnd.randrange(len(ORIGINS))], "day": day.isoformat(),
                      "hour": rnd.randrange(5, 23),
                      "dep_delay": None if rnd.random() < 0.06 else float(rnd.randrange(-15, 120))}
            late_by = 0 if n == NIGHTS or rnd.random() > 0.12 else rnd.randrange(1, NIGHTS - n + 1)
            out[n + late_by]["flights"].append(flight)
        again = [f for f in out[n]["flights"] if rnd.random() < 0.08]
        if n < NIGHTS:
            out[n + 1]["flights"].extend(dict(f) for f in again)  # sent twice: the clean stage drops them
    out[1]["airlines"] = [{"carrier": c, "name": name} for c, name in AIRLINES.items() if c != LATE_CARRIER]
    out[2]["airlines"] = [{"carrier": LATE_CARRIER, "name": AIRLINES[LATE_CARRIER]}]
    return out
