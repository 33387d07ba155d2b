"""Read jobs from any CSV file through a column mapping.

The default mapping fits the traces shipped in `rackwise.traces`
(header ``job_id,cluster,submit_time,duration,num_gpus``). A file ending in
``.gz`` is read as gzip. Line numbers in errors count the header as line 1
and assume no quoted field spans several lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from rackwise.errors import InputError
from rackwise.workload.job import Job
from rackwise.workload.workload import Workload

TIME_UNITS_S = {"s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}

_TEXT_FIELDS = ("job_id", "group", "user", "model")


class ColumnMapping(BaseModel):
    """Which CSV column holds each job field (``None``: the file has no such column).

    Time columns (``submit_time``, ``duration_s``) are read in the unit given
    to `read_csv` and converted to seconds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = "job_id"
    submit_time: str = "submit_time"
    n_gpus: str = "num_gpus"
    duration_s: str = "duration"
    group: str | None = "cluster"
    user: str | None = None
    model: str | None = None
    batch_size: str | None = None
    total_iters: str | None = None

    @classmethod
    def from_yaml(cls, path: str | Path) -> ColumnMapping:
        """Read a mapping from a YAML file of ``field: column`` pairs."""
        import yaml

        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            detail = " ".join(str(exc).split())  # YAML errors span lines; keep one
            raise InputError(f"cannot read column mapping: {detail}", source=str(path)) from None
        if not isinstance(data, dict):
            raise InputError("a column mapping must be a mapping of field: column",
                             source=str(path))
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            raise InputError(first["msg"], source=str(path), field=field) from None

    def columns(self) -> dict[str, str]:
        """Field -> column for every mapped field."""
        return {field: column for field, column in self.model_dump().items() if column is not None}


def read_csv(path: str | Path, mapping: ColumnMapping | None = None, *,
             time_unit: str = "s") -> Workload:
    """Read a workload from a CSV file.

    Args:
        path: The file; ``*.gz`` is decompressed.
        mapping: Column names; the default fits the shipped traces.
        time_unit: Unit of the time columns: ``s``, ``ms``, ``min`` or ``h``.

    Returns:
        The jobs in file order, each remembering its line.

    Raises:
        InputError: naming the file, line and column of the first bad value.
    """
    mapping = mapping or ColumnMapping()
    table = read_table(path, mapping, time_unit=time_unit)
    return table_to_workload(table, name=_stem(Path(path)), source=str(path),
                             n_gpus_field=mapping.n_gpus)


def read_table(path: str | Path, mapping: ColumnMapping, *, time_unit: str = "s") -> pd.DataFrame:
    """Read and check a CSV file into a frame with rackwise field names.

    The frame has one column per mapped field (times in seconds) and a
    ``line`` column; rows keep file order.
    """
    if time_unit not in TIME_UNITS_S:
        raise InputError(f"unknown time unit {time_unit!r}; use one of "
                         f"{', '.join(TIME_UNITS_S)}", field="time_unit")
    source = str(path)
    columns = mapping.columns()
    text_columns = {columns[f]: str for f in _TEXT_FIELDS if f in columns}
    raw = _parse(Path(path), text_columns)
    for field, column in columns.items():
        if column not in raw.columns:
            raise InputError(f"missing column '{column}' (for {field}); the header has: "
                             f"{', '.join(map(str, raw.columns))}",
                             source=source, line=1, field=column)
    raw = raw[list(dict.fromkeys(columns.values()))]
    blank = raw.isna().all(axis=1)
    if blank.any():  # blank lines: dropped, but the index keeps later line numbers right
        raw = raw[~blank]
    if raw.empty:
        raise InputError("no jobs: the file has only a header", source=source)
    lines = raw.index.to_numpy(dtype=np.int64) + 2
    out: dict[str, Any] = {"line": lines}
    scale = TIME_UNITS_S[time_unit]

    job_ids = _text(raw, columns["job_id"], source, lines, required=True)
    duplicated = job_ids.duplicated()
    if duplicated.any():
        at = int(np.argmax(duplicated.to_numpy()))
        first = int(np.argmax((job_ids == job_ids.iloc[at]).to_numpy()))
        raise InputError(f"duplicate job id {job_ids.iloc[at]!r} (first on line {lines[first]})",
                         source=source, line=int(lines[at]), field=columns["job_id"])
    out["job_id"] = job_ids.to_numpy(dtype=object)

    submit = _number(raw, columns["submit_time"], source, lines)
    _require(submit, submit >= 0.0, "must not be negative", columns["submit_time"], source,
             lines)
    out["submit_time"] = submit * scale

    duration = _number(raw, columns["duration_s"], source, lines)
    _require(duration, duration > 0.0, "must be positive", columns["duration_s"], source,
             lines)
    out["duration_s"] = duration * scale

    out["n_gpus"] = _whole(raw, columns["n_gpus"], source, lines, minimum=1)
    if "batch_size" in columns:
        out["batch_size"] = _whole(raw, columns["batch_size"], source, lines, minimum=1)
    if "total_iters" in columns:
        iters = _number(raw, columns["total_iters"], source, lines)
        _require(iters, iters > 0.0, "must be positive", columns["total_iters"], source, lines)
        out["total_iters"] = iters
    for field in ("group", "user", "model"):
        if field in columns:
            values = _text(raw, columns[field], source, lines, required=False)
            out[field] = values.astype(object).where(values.notna(), None).to_numpy(dtype=object)
    return pd.DataFrame(out)


def table_to_workload(table: pd.DataFrame, *, name: str, source: str,
                      n_gpus_field: str) -> Workload:
    """Build the `Job` objects of a frame from `read_table` (fast: no per-row pandas)."""
    n_rows = len(table)

    def column(field: str) -> Any:
        return table[field].tolist() if field in table.columns else repeat(None, n_rows)

    durations = table["duration_s"].tolist()
    iters = table["total_iters"].tolist() if "total_iters" in table.columns else durations
    jobs = tuple(map(Job, table["job_id"].tolist(), table["submit_time"].tolist(),
                     table["n_gpus"].tolist(), durations, iters, column("group"),
                     column("user"), column("model"), column("batch_size")))
    return Workload(jobs=jobs, name=name, source=source, lines=tuple(table["line"].tolist()),
                    n_gpus_field=n_gpus_field)


# --------------------------------------------------------------------------- helpers


def _parse(path: Path, text_columns: Mapping[str, type]) -> pd.DataFrame:
    compression = "gzip" if path.suffix == ".gz" else None
    try:
        return pd.read_csv(path, dtype=text_columns, compression=compression,
                           skip_blank_lines=False, skipinitialspace=True)
    except FileNotFoundError:
        raise InputError("no such file", source=str(path)) from None
    except pd.errors.EmptyDataError:
        raise InputError("empty file: expected a header line and jobs", source=str(path)) from None
    except pd.errors.ParserError as exc:
        raise InputError(f"not a valid CSV file: {exc}", source=str(path)) from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"cannot read file: {exc}", source=str(path)) from None


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".csv", ".tsv"):
        name = name.removesuffix(suffix)
    return name


def _fail(message: str, source: str, line: int, column: str) -> InputError:
    return InputError(message, source=source, line=line, field=column)


def _text(raw: pd.DataFrame, column: str, source: str, lines: np.ndarray, *,
          required: bool) -> pd.Series:
    values = raw[column]
    if required:
        missing = values.isna().to_numpy()
        if missing.any():
            at = int(np.argmax(missing))
            raise _fail("empty value", source, int(lines[at]), column)
    return values


def _number(raw: pd.DataFrame, column: str, source: str, lines: np.ndarray) -> np.ndarray:
    values = raw[column]
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        numeric = pd.to_numeric(values, errors="coerce")
        bad = (numeric.isna() & values.notna()).to_numpy()
        if bad.any():
            at = int(np.argmax(bad))
            raise _fail(f"not a number: {values.iloc[at]!r}", source, int(lines[at]), column)
        values = numeric
    array: np.ndarray = values.to_numpy(dtype=np.float64, na_value=np.nan)
    finite = np.isfinite(array)
    if not finite.all():
        at = int(np.argmax(~finite))
        what = "empty value" if np.isnan(array[at]) else f"not a finite number: {array[at]}"
        raise _fail(what, source, int(lines[at]), column)
    return array


def _whole(raw: pd.DataFrame, column: str, source: str, lines: np.ndarray, *,
           minimum: int) -> np.ndarray:
    array = _number(raw, column, source, lines)
    fractional = array != np.floor(array)
    if fractional.any():
        at = int(np.argmax(fractional))
        raise _fail(f"not a whole number: {array[at]:g}", source, int(lines[at]), column)
    _require(array, array >= minimum, f"must be at least {minimum}", column, source, lines)
    return array.astype(np.int64)


def _require(values: np.ndarray, ok: np.ndarray, message: str, column: str, source: str,
             lines: np.ndarray) -> None:
    if not ok.all():
        at = int(np.argmax(~ok))
        raise _fail(f"{message}, got {values[at]:g}", source, int(lines[at]), column)
