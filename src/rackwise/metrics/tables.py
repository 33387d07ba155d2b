"""The jobs and timeline tables as pyarrow tables, for writing Parquet without pandas.

`rackwise simulate` writes these for every run; building them straight from
the records spares it importing pandas, most of its import time. Read back
by pandas they are the frames `records_frame` and `timeline_frame` give,
dtypes included (a column pyarrow would type otherwise than pandas, such as
job ids that are not all strings, goes through pandas' own conversion).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.metrics.records import JobRecord, Timeline

if TYPE_CHECKING:
    import pyarrow as pa

_FLOATS = {float, np.float64}
_INTS = {int, np.int64}
# The record's fields declared float, read a record at a time (`_float_columns`).
_FLOAT_FIELDS = tuple(spec.name for spec in fields(JobRecord) if spec.type in ("float", float))


def records_table(records: Sequence[JobRecord]) -> pa.Table:
    """`records_frame` as a pyarrow table: one row per job, sorted by submission then job id."""
    import pyarrow as pa

    ids = list(map(attrgetter("job_id"), records))
    submits = list(map(attrgetter("submit_time"), records))
    submit_kinds = set(map(type, submits))
    if not records or not (set(map(type, ids)) <= {str} and submit_kinds <= _FLOATS | _INTS):
        from rackwise.metrics.summary import records_frame

        return pa.Table.from_pandas(records_frame(records), preserve_index=False)
    # Stable, as the frame's sort: by submit time (as the column's dtype orders it), ties by
    # job id (lexsort's last key first).
    submit_type = np.int64 if submit_kinds <= _INTS else np.float64
    order = np.lexsort((np.array(ids, dtype=str), np.array(submits, dtype=submit_type)))
    columns = _float_columns(records, order)
    # The rest a column at a time, in the records' own order (the order they lie in memory), then sorted.
    return pa.table({name: columns[name] if name in columns else
                     _arrow_column(list(map(attrgetter(name), records)), order)
                     for name in JobRecord.columns()})


def _float_columns(records: Sequence[JobRecord], order: np.ndarray) -> dict[str, pa.Array]:
    """The float fields' columns, taken in ``order``, if every value in them is a float; else none.

    Read a record at a time: the figures of a finished job are mostly made
    together when it ends (all of them in the compiled build, which boxes them
    then), so they lie together in memory, and one pass over each record's
    fields reads each stretch of it once, where a column at a time reads it
    once per column.
    """
    rows = list(map(attrgetter(*_FLOAT_FIELDS), records))
    if set(map(type, chain.from_iterable(rows))) != {float}:
        return {}  # ints among them, say: a column at a time, as pandas types each
    table = np.fromiter(chain.from_iterable(rows), np.float64, len(rows) * len(_FLOAT_FIELDS))
    table = table.reshape(len(rows), len(_FLOAT_FIELDS))[order]
    return {name: _from_numbers(np.ascontiguousarray(table[:, i])) for i, name in enumerate(_FLOAT_FIELDS)}


def timeline_table(timeline: Timeline) -> pa.Table:
    """`timeline_frame` as a pyarrow table."""
    import pyarrow as pa

    return pa.table({"time": _arrow_column(timeline.time),
                     "busy_gpus": _arrow_column(timeline.busy_gpus),
                     "n_pending": _arrow_column(timeline.n_pending),
                     "n_running": _arrow_column(timeline.n_running)})


def _arrow_column(values: list[Any], order: np.ndarray | None = None) -> pa.Array:
    """The column pandas would make of ``values`` (taken in ``order``), as it writes it to Parquet.

    Only ints: int64; only numbers, some not ints: float64; only text, with
    or without missing values: pandas' string type, which it writes as large
    strings; only missing values: a null column. Anything else (ints beyond
    int64, mixed text and numbers, other objects) is left to pandas.

    Built from buffers: ``pa.array`` imports pandas whatever it is given.
    """
    import pyarrow as pa

    kinds = set(map(type, values))
    if kinds and kinds <= _FLOATS | _INTS:
        ints = kinds <= _INTS
        try:
            array = np.fromiter(values, np.int64 if ints else np.float64, len(values))
        except OverflowError:  # beyond int64: pandas picks the type
            return _through_pandas(values, order)
        return _from_numbers(array if order is None else array[order])
    if kinds == {type(None)}:
        return pa.nulls(len(values))
    if kinds and kinds <= {str, type(None)}:
        try:
            return _large_strings(values if order is None else [values[i] for i in order.tolist()])
        except UnicodeEncodeError:  # not UTF-8: pandas decides
            pass
    return _through_pandas(values, order)


def _from_numbers(array: np.ndarray) -> pa.Array:
    """An int64 or float64 array as the pyarrow array on its buffer."""
    import pyarrow as pa

    kind = pa.int64() if array.dtype == np.int64 else pa.float64()
    return pa.Array.from_buffers(kind, len(array), [None, pa.py_buffer(array)])


def _through_pandas(values: list[Any], order: np.ndarray | None) -> pa.Array:
    import pandas as pd
    import pyarrow as pa

    series = pd.Series(values)
    return pa.Array.from_pandas(series if order is None else series.iloc[order])


def _large_strings(values: list[str | None]) -> pa.Array:
    import pyarrow as pa

    encoded = [b"" if value is None else value.encode() for value in values]
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    valid = np.fromiter((value is not None for value in values), bool, len(values))
    n_missing = len(values) - int(valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if n_missing else None
    return pa.Array.from_buffers(pa.large_string(), len(values),
                                 [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
                                 null_count=n_missing)
