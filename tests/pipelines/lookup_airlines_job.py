"""A stage that writes the airlines the lookup stage reads (a producer of its lookup)."""


def transform(df):
    return df.select("_id", "carrier", "name")
