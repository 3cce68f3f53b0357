"""Stage clean: one row per flight; cancelled flights (no dep_delay) to their own topic.

A flight sent twice in one dump is dropped here; one sent again on a later night is dropped
by the dedup key of ``flights.clean``.
"""

from pyspark.sql import functions as F

from minikafka.job import main

COLUMNS = ["_id", "flight_id", "carrier", "origin", "day", "hour", "dep_delay"]


def transform(df):
    once = df.dropDuplicates(["flight_id"]).select(*COLUMNS)
    return {"flights.clean": once.where(F.col("dep_delay").isNotNull()),
            "flights.cancelled": once.where(F.col("dep_delay").isNull())}


if __name__ == "__main__":
    raise SystemExit(main())
