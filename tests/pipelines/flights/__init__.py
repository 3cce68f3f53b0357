"""A small nightly flights pipeline (nycflights13-like) for the late-data and lookup tests.

``data.nights()`` makes the dumps, ``flights.toml`` ties the models and ``jobs/`` together.
"""
