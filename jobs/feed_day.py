"""Stage feed_day: items per feed per day, kept exact when items arrive late.

The new items only say which (feed, day) groups changed; each touched group is counted
again from every item of that feed and day, and its row in the keyed table rss.feed_day is
replaced (a group that counts the same writes no version). A late item corrects its day;
a replay of rss.items and a re-run recompute the same counts.
"""

from pyspark.sql import functions as F

from minikafka.job import main

GROUP = ["feed", "day"]


def transform(df, ctx):
    touched = df.select("feed", F.to_date("published").alias("day")).distinct()
    items = (ctx.read_groups("rss.items", touched, ["feed"])      # every item of the touched feeds...
                .withColumn("day", F.to_date("published"))
                .join(touched, GROUP, "left_semi"))                # ...on the touched days
    return items.groupBy(*GROUP).agg(F.count("*").alias("items"))


if __name__ == "__main__":
    raise SystemExit(main())
