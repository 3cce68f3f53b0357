"""The same Iceberg table read three ways: pyiceberg, DuckDB (its iceberg extension, from the
pinned extension wheel: nothing downloaded) and polars; a Delta table by deltalake, DuckDB
(its delta extension, from its pinned wheel) and polars."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from minikafka.ledger.lake import reader_catalog


def extension_directory() -> str:
    """Where the duckdb-ext-* wheels put DuckDB's extensions."""
    return str(Path(importlib.util.find_spec("duckdb_ext").submodule_search_locations[0]) / "extensions")


def duckdb_connection():
    import duckdb

    con = duckdb.connect(config={"extension_directory": extension_directory(), "autoinstall_known_extensions": False,
                                 "autoload_known_extensions": True})
    con.load_extension("iceberg")
    con.load_extension("delta")
    con.sql("SET TimeZone = 'UTC'")  # timestamptz columns come back as Arrow tz=UTC, as pyiceberg reads them
    return con


def logical(arrow_type) -> str:
    """An Arrow type by what it holds: polars hands out every string and binary column in its
    64-bit-offset layout (``large_string``), the same values as ``string``."""
    return {"large_string": "string", "large_binary": "binary"}.get(str(arrow_type), str(arrow_type))


def read_three_ways(ledger: str, table: str, order_by: str = "_id") -> dict[str, tuple[list, list]]:
    """{reader: (rows as sorted tuples, [(column, Arrow type)])} of ``minikafka.<table>``."""
    import polars as pl

    os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")  # no polars_iceberg plugin: say so quietly
    loaded = reader_catalog(ledger).load_table(f"minikafka.{table}")
    by_pyiceberg = loaded.scan().to_arrow()
    con = duckdb_connection()
    by_duckdb = con.sql(f"SELECT * FROM iceberg_scan('{loaded.metadata_location}')").fetch_arrow_table()
    by_polars = pl.scan_iceberg(loaded).collect().to_arrow()
    out = {}
    for name, t in (("pyiceberg", by_pyiceberg), ("duckdb", by_duckdb), ("polars", by_polars)):
        t = t.sort_by(order_by)
        out[name] = ([tuple(r.values()) for r in t.to_pylist()], [(f.name, logical(f.type)) for f in t.schema])
    return out


def read_delta_three_ways(location: str, order_by: str = "_id") -> dict[str, tuple[list, list]]:
    """{reader: (rows as sorted tuples, [(column, Arrow type)])} of the Delta table at ``location``,
    columns in the table's schema order (a partition column comes back last from some readers)."""
    import polars as pl
    from deltalake import DeltaTable

    table = DeltaTable(location)
    names = [f.name for f in table.schema().fields]
    con = duckdb_connection()
    by_duckdb = con.sql(f"SELECT * FROM delta_scan('{location}')").fetch_arrow_table()
    out = {}
    for name, t in (("deltalake", table.to_pyarrow_table()), ("duckdb", by_duckdb),
                    ("polars", pl.read_delta(location).to_arrow())):
        t = t.select(names).sort_by(order_by)
        out[name] = ([tuple(r.values()) for r in t.to_pylist()], [(f.name, logical(f.type)) for f in t.schema])
    return out
