"""Stage score: rank summaries by length and keywords; fan-in of both branches."""

from pyspark.sql import functions as F

from minikafka.job import main

KEYWORDS = r"(?i)(sqlite|spark|homelab|self-host|kafka|python)"


def transform(df):
    score = (F.log1p(F.col("words").cast("double")) + F.when(F.col("title").rlike(KEYWORDS), 2.0).otherwise(0.0)
             + F.when(F.col("kind") == "video", 0.5).otherwise(0.0))
    return (df.withColumn("score", F.round(score, 3))
              .withColumn("category", F.when(F.col("score") >= 6, "must-read")
                          .when(F.col("score") >= 4, "maybe").otherwise("skip"))
              .select("_id", "url", "title", "kind", "score", "category", "published"))


if __name__ == "__main__":
    raise SystemExit(main())
