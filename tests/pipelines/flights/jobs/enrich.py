"""Stage enrich: the night's new flights joined to two lookups, the airlines and the weather.

The lookups are read whole (every row committed before the run), so a late flight finds the
weather of its hour, and a flight whose airline is not known yet keeps ``airline`` null.
"""

from minikafka.job import main


def transform(frames):
    flights = frames["flights.clean"]
    airlines = frames["airlines"].withColumnRenamed("name", "airline")
    weather = frames["weather"]
    return (flights.join(airlines, "carrier", "left")
                   .join(weather, ["origin", "day", "hour"], "left")
                   .select("_id", "flight_id", "carrier", "airline", "origin", "day", "hour", "dep_delay",
                           "temp", "wind_speed"))


if __name__ == "__main__":
    raise SystemExit(main())
