"""Topic storage: a topic's table, its rows and what each row's status is made of.

Names (``identifiers``), the typed columns (``columns``), the dedup key (``keys``), a topic's
layout (``layout``) and the catalog of topics (``catalog``); the one reader and writer of a
topic's rows (``table``) with its bulk sizing (``bulk``), row files (``rowfiles``) and Arrow
export (``arrow``); the ack positions every way of consuming keeps (``acks``), the status
expressions read from them (``status``) and counts that do not scan (``counts``); safe row
filters (``filters``), a model's changes applied in place (``evolution``), the id range of a time span (``browse``), and keyed tables (``keyed``:
merged versions of rows by key, their current rows).

The lowest room: it imports no other room of the ledger. The acks live here, not with the
consumption state, because a topic's rows have no status column: ``table`` reads what is
pending from the ack positions, so the two are one floor.
"""

from . import acks, browse, bulk, catalog, counts, evolution, filters, keyed, keys, rowfiles
from .acks import find_consumer, lag
from .arrow import rows_to_arrow
from .catalog import stored_model_path, topic_names
from .columns import (
    FLOAT_NAN_REFUSED,
    JSON_NON_FINITE_REFUSED,
    ColumnSpec,
    decimal_layout,
    decimal_refusal,
    float_text,
    json_value_refusal,
    key_path,
)
from .filters import InvalidFilterError, where_clause
from .identifiers import LEDGER_PREFIX, quote_identifier, validate_consumer_name, validate_topic_name
from .keyed import table_spec
from .keys import row_hashes
from .layout import META_SELECT, N_META, TopicLayout
from .rowfiles import MAX_ATTACHED, write_row_file
from .table import (
    PAGE,
    ReadBounds,
    TopicTable,
    id_range_predicates,
    insert_params,
    insert_params_of_columns,
    partition_predicates,
)

__all__ = [
    "acks",
    "browse",
    "bulk",
    "catalog",
    "ColumnSpec",
    "counts",
    "decimal_layout",
    "decimal_refusal",
    "evolution",
    "filters",
    "find_consumer",
    "FLOAT_NAN_REFUSED",
    "float_text",
    "id_range_predicates",
    "insert_params",
    "insert_params_of_columns",
    "InvalidFilterError",
    "JSON_NON_FINITE_REFUSED",
    "json_value_refusal",
    "key_path",
    "keyed",
    "keys",
    "lag",
    "LEDGER_PREFIX",
    "MAX_ATTACHED",
    "META_SELECT",
    "N_META",
    "PAGE",
    "partition_predicates",
    "quote_identifier",
    "ReadBounds",
    "row_hashes",
    "rowfiles",
    "rows_to_arrow",
    "stored_model_path",
    "table_spec",
    "topic_names",
    "TopicLayout",
    "TopicTable",
    "validate_consumer_name",
    "validate_topic_name",
    "where_clause",
    "write_row_file",
]
