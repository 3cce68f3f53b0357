"""A row_fn job (a stage with lookups may not use one)."""


def row_fn(row):
    return row
