"""A job whose transform always fails (for strategy tests)."""


def transform(df):
    raise RuntimeError("this stage is broken on purpose")
