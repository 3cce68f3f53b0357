"""A job whose transform always fails (for strategy tests)."""

from minikafka.job import main


def transform(df):
    raise RuntimeError("this stage is broken on purpose")


if __name__ == "__main__":
    raise SystemExit(main())
