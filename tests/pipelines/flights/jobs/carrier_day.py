"""Stage carrier_day: the average departure delay per carrier and day, exact under late data.

The new rows only say which (carrier, day) groups changed; each touched group is recomputed
from every enriched flight of that group and replaces its row in the keyed table. A late
flight therefore corrects its day's average, and a replayed input recomputes the same values.

No rounding is needed here (the how-to rounds float aggregates): delays are whole minutes, so
every partial sum is exact in a double whatever order Spark adds them in, and the average of a
group is the same to the bit on every recompute. The test compares it with pandas' mean.
"""

from pyspark.sql import functions as F

from minikafka.job import main

GROUP = ["carrier", "day"]


def transform(df, ctx):
    touched = df.select(*GROUP).distinct()
    rows = ctx.read_groups("flights.enriched", touched, GROUP)
    return (rows.groupBy(*GROUP)
                .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay")))


if __name__ == "__main__":
    raise SystemExit(main())
