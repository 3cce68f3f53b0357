"""The Parquet data files of one Iceberg append, written a batch at a time beside the commit.

``DataFileWriter`` takes the rows of an append as Arrow record batches (the lake schema of
``rows.arrow_schema``: ``_id`` then the fields) and writes them as pyiceberg writes an
append (``Table.append``): one file per partition (a new one past the table's target file
size), the table's Parquet settings (compression, page sizes, row-group limit), its
schema with field ids, and the statistics pyiceberg records per file (``DataFile``). It
differs in when the work is done, not in what is written:

- the work runs in one worker thread (Arrow and Parquet release the GIL), so it overlaps
  the caller: a stage's commit inserting the next batch into SQLite, or a sync reading the
  next rows back;
- each batch is split by partition once (a stable sort on the partition values, then
  slices: rows keep their order inside a partition), not filtered once per partition;
- a partition's rows go to its file a row group at a time (``ROW_GROUP_ROWS`` rows), so
  only the last, partial row group of each file is encoded when the append finishes.

Crash contract: it writes new files only, under the table's data location, and never
metadata: a file is part of the table only once a snapshot that lists it is committed.
Until then it is an orphan (``iceberg.orphan_files``); ``discard`` deletes the files of an
append given up.
"""

from __future__ import annotations

import itertools
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ...util.optional import require

ROW_GROUP_ROWS = 65_536  # rows per row group (at most the table's write.parquet.row-group-limit)
DICTIONARY_SAMPLE = 4_096  # values of a file's first row group that decide each column's dictionary


class _PartitionFile:
    """The open data file of one partition: rows waiting for a row group, the Parquet writer."""

    __slots__ = ("key", "pending", "pending_rows", "writer", "stream", "output", "path", "nbytes")

    def __init__(self, key: Any):
        self.key = key  # pyiceberg PartitionKey (None: unpartitioned)
        self.pending: list[Any] = []
        self.pending_rows = 0
        self.writer = self.stream = self.output = self.path = None
        self.nbytes = 0  # uncompressed Arrow bytes written to the open file


class DataFileWriter:
    """Writes an append's data files from record batches (see the module docstring).

    ``add`` queues a batch and returns at once; ``finish`` waits for the queue, writes what
    is left and returns the ``DataFile`` entries for the snapshot; ``discard`` stops and
    deletes every file written. Errors of the worker are raised by ``finish``.
    """

    def __init__(self, table: Any, arrow_schema: Any):
        pa = require("pyarrow", "lake")
        pio = require("pyiceberg.io.pyarrow", "lake")
        tables = require("pyiceberg.table", "lake")
        props = require("pyiceberg.utils.properties", "lake")
        config = require("pyiceberg.utils.config", "lake")
        locations = require("pyiceberg.table.locations", "lake")
        schema_mod = require("pyiceberg.schema", "lake")

        metadata = table.metadata
        self._pa = pa
        self._pio = pio
        self._io = table.io
        self._spec = metadata.spec()
        self._schema = metadata.schema()
        self._properties = metadata.properties
        self._spec_id = metadata.default_spec_id
        self._format = pio.FileFormat.PARQUET
        sanitized = schema_mod.sanitize_column_names(self._schema)
        self._file_schema = sanitized if sanitized != self._schema else self._schema
        self._downcast = config.Config().get_bool(tables.DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE) or False
        self._task_schema = pio.pyarrow_to_schema(arrow_schema, name_mapping=self._schema.name_mapping,
                                                  downcast_ns_timestamp_to_us=self._downcast,
                                                  format_version=metadata.format_version)
        self._format_model = pio.FileFormatFactory.get(self._format)
        self._writer_kwargs = pio._get_parquet_writer_kwargs(self._properties)
        limit = props.property_as_int(self._properties, tables.TableProperties.PARQUET_ROW_GROUP_LIMIT,
                                      tables.TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT)
        self._limit = max(1, limit)
        self._group_rows = min(ROW_GROUP_ROWS, self._limit)
        self._target_bytes = props.property_as_int(self._properties, tables.TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                                                   tables.TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT)
        self._stats_plan = pio.compute_statistics_plan(self._file_schema, self._properties)
        self._column_ids = pio.parquet_path_to_id_mapping(self._file_schema)
        self._locations = locations.load_location_provider(table_location=metadata.location,
                                                           table_properties=self._properties)
        self._sources = []  # (partition field, source column name, transform function)
        for f in self._spec.fields:
            source = self._schema.find_field(f.source_id)
            self._sources.append((f, self._schema.find_column_name(f.source_id),
                                  f.transform.pyarrow_transform(source.field_type)))
        self._write_uuid = uuid.uuid4()
        self._file_numbers = itertools.count()
        self._partitions: dict[tuple, _PartitionFile] = {}
        self._done: list[Any] = []
        self.paths: list[str] = []  # every file created, for discard
        self.rows = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minikafka-lake")
        self._futures: list[Future] = []
        self._failed: BaseException | None = None

    # -- the caller's side ------------------------------------------------------------------
    def add(self, batch: Any) -> None:
        """Queue ``batch`` (rows of the lake schema) for its partitions' files."""
        self.rows += batch.num_rows
        self._futures.append(self._pool.submit(self._add, batch))
        self._futures = [f for f in self._futures if not f.done() or f.exception() is not None]

    def finish(self) -> list[Any]:
        """Wait for the queued batches, write the partial row groups, close every file; the
        ``DataFile`` entries of the append (one or more per partition)."""
        try:
            for f in self._futures:
                f.result()
            if self._failed is not None:
                raise self._failed
            open_files = list(self._partitions.values())
            # the last row groups: half in the worker, half here (two cores)
            later = [self._pool.submit(self._close, p) for p in open_files[::2]]
            for p in open_files[1::2]:
                self._close(p)
            for f in later:
                f.result()
        finally:
            self._pool.shutdown(wait=True)
        return list(self._done)

    def discard(self) -> None:
        """Stop, and delete the files written (an append given up: nothing refers to them)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        for p in self._partitions.values():
            for closing in (p.writer, p.stream):
                try:
                    if closing is not None:
                        closing.close()
                except Exception:  # noqa: BLE001 - a half-written file is deleted next
                    pass
        for path in self.paths:
            try:
                self._io.delete(path)
            except Exception:  # noqa: BLE001 - left for orphan cleanup (iceberg.remove_orphans)
                pass
        self.paths.clear()

    # -- the worker's side ------------------------------------------------------------------
    def _add(self, batch: Any) -> None:
        if self._failed is not None:
            return
        try:
            for key, rows in self._split(batch):
                part = self._partitions.get(key)
                if part is None:
                    part = self._partitions[key] = _PartitionFile(self._partition_key(key))
                part.pending.append(rows)
                part.pending_rows += rows.num_rows
                if part.pending_rows >= self._group_rows:
                    self._write_group(part)
        except BaseException as exc:
            self._failed = exc
            raise

    def _split(self, batch: Any) -> list[tuple[tuple, Any]]:
        """(partition values, its rows) of ``batch``, rows in their order within a partition."""
        if not self._sources:
            return [((), batch)]
        pa, pc = self._pa, require("pyarrow.compute", "lake")
        import numpy as np

        codes = None
        dictionaries = []
        for _field, name, transform in self._sources:
            encoded = pc.dictionary_encode(transform(batch.column(name)), null_encoding="encode")
            if isinstance(encoded, pa.ChunkedArray):
                encoded = encoded.combine_chunks()
            dictionaries.append(encoded.dictionary)
            indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            codes = indices if codes is None else codes * len(encoded.dictionary) + indices
        if len(dictionaries) == 1 and len(dictionaries[0]) == 1:
            return [((dictionaries[0][0].as_py(),), batch)]
        order = np.argsort(codes, kind="stable")
        ordered = batch.take(pa.array(order))
        sorted_codes = codes[order]
        starts = np.flatnonzero(np.diff(sorted_codes)) + 1
        bounds = [0, *starts.tolist(), len(sorted_codes)]
        out = []
        for a, b in zip(bounds, bounds[1:]):
            code = int(sorted_codes[a])
            values = []
            for d in reversed(dictionaries):
                code, i = divmod(code, len(d))
                values.append(d[i].as_py())
            out.append((tuple(reversed(values)), ordered.slice(a, b - a)))
        return out

    def _partition_key(self, values: tuple) -> Any:
        if not self._sources:
            return None
        p = require("pyiceberg.partitioning", "lake")
        return p.PartitionKey(field_values=[p.PartitionFieldValue(field=f, value=v)
                                            for (f, _name, _t), v in zip(self._sources, values)],
                              partition_spec=self._spec, schema=self._schema)

    def _write_group(self, part: _PartitionFile) -> None:
        """The partition's pending rows as one row group of its file (a new file past the
        target file size, as pyiceberg bin-packs an append)."""
        pa, pio = self._pa, self._pio
        rows = pa.Table.from_batches(part.pending)
        part.pending, part.pending_rows = [], 0
        nbytes = rows.nbytes
        if part.writer is not None and part.nbytes + nbytes > self._target_bytes:
            self._finish_file(part)
        projected = pa.Table.from_batches([
            pio._to_requested_schema(requested_schema=self._file_schema, file_schema=self._task_schema, batch=b,
                                     downcast_ns_timestamp_to_us=self._downcast, include_field_ids=True,
                                     format_model=self._format_model)
            for b in rows.to_batches()])
        if part.writer is None:
            self._open_file(part, projected)
        part.writer.write(projected, row_group_size=self._limit)
        part.nbytes += nbytes

    def _open_file(self, part: _PartitionFile, first_rows: Any) -> None:
        pq = require("pyarrow.parquet", "lake")
        name = f"00000-{next(self._file_numbers)}-{self._write_uuid}.{self._format_model.file_extension()}"
        part.path = self._locations.new_data_location(data_file_name=name, partition_key=part.key)
        self.paths.append(part.path)
        part.output = self._io.new_output(part.path)
        part.stream = part.output.create(overwrite=True)
        part.writer = pq.ParquetWriter(part.stream, schema=first_rows.schema, store_decimal_as_integer=True,
                                       use_dictionary=_dictionary_columns(first_rows), **self._writer_kwargs)
        part.nbytes = 0

    def _finish_file(self, part: _PartitionFile) -> None:
        pio = self._pio
        data_file = require("pyiceberg.manifest", "lake")
        typedef = require("pyiceberg.typedef", "lake")
        part.writer.close()
        part.stream.close()
        stats = pio.data_file_statistics_from_parquet_metadata(
            parquet_metadata=part.writer.writer.metadata, stats_columns=self._stats_plan,
            parquet_column_mapping=self._column_ids)
        self._done.append(data_file.DataFile.from_args(
            content=data_file.DataFileContent.DATA, file_path=part.path, file_format=self._format,
            partition=part.key.partition if part.key else typedef.Record(), file_size_in_bytes=len(part.output),
            sort_order_id=None, spec_id=self._spec_id, equality_ids=None, key_metadata=None,
            **stats.to_serialized_dict()))
        part.writer = part.stream = part.output = part.path = None

    def _close(self, part: _PartitionFile) -> None:
        if part.pending_rows:
            self._write_group(part)
        if part.writer is not None:
            self._finish_file(part)


def _dictionary_columns(rows: Any) -> list[str]:
    """The columns worth a dictionary in a file whose first row group is ``rows``: those whose
    values repeat (at most half distinct in a sample). A column of mostly distinct values (ids,
    URLs, scores, times) would only fill the dictionary page past its limit and fall back to
    plain encoding, at twice the cost of the file's encoding and a larger file."""
    pc = require("pyarrow.compute", "lake")
    sample = rows.slice(0, DICTIONARY_SAMPLE)
    if sample.num_rows == 0:
        return []
    chosen = []
    for name, column in zip(sample.column_names, sample.columns):
        try:
            repeats = pc.count_distinct(column, mode="all").as_py() * 2 <= sample.num_rows
        except (NotImplementedError, TypeError, ValueError):  # a type Arrow cannot count: Parquet's default
            repeats = True
        if repeats:
            chosen.append(name)
    return chosen
