"""Read jobs from any CSV file through a column mapping.

The default mapping fits the traces shipped in `rackwise.traces`
(header ``job_id,cluster,submit_time,duration,num_gpus``). A file ending in
``.gz`` is read as gzip. Line numbers in errors count the header as line 1
and assume no quoted field spans several lines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rackwise.errors import InputError, parse_error
from rackwise.workload.readers.columns import table_to_workload
from rackwise.workload.readers.row_filters import RowFilters, apply_row_filters, format_skipped
from rackwise.workload.workload import Workload

TIME_UNITS_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0, "h": 3600.0}

TimeUnit = Literal["s", "ms", "us", "min", "h", "datetime"]
FractionalGpus = Literal["refuse", "round_up", "share"]

_TEXT_FIELDS = ("job_id", "group", "user", "model")
_COLUMN_FIELDS = ("job_id", "submit_time", "n_gpus", "duration_s", "start_time", "end_time",
                  "group", "user", "model", "batch_size", "total_iters")
_TIME_FIELDS = ("submit_time", "duration_s", "start_time", "end_time")
_CONSTANT_FIELDS = ("submit_time", "n_gpus", "group", "user", "model", "batch_size",
                    "total_iters")


class ColumnMapping(BaseModel):
    """Which CSV column holds each job field (``None``: the file has no such column).

    Columns named in ``tags`` are kept on each job as text tags.

    Time columns (``submit_time``, ``duration_s``, ``start_time``,
    ``end_time``) are read in the unit given to `read_csv` unless ``units``
    names one for the field (``s``, ``ms``, ``us``, ``min``, ``h``, or
    ``datetime`` for date-time strings), and converted to seconds. Without a
    ``duration_s`` column the duration is ``end_time`` minus ``start_time``
    (or minus ``submit_time`` when no start column is mapped). A field with
    no column may take one value for every job from ``constants``. Submit
    times read as date-times count from the earliest one in the file.

    The GPU column is multiplied by ``gpu_scale`` (0.01 for a column in
    percent of a GPU). A count that is not whole is refused unless
    ``fractional_gpus`` says otherwise: ``round_up`` to whole GPUs, or
    ``share``: below one GPU the job asks for that share of one GPU (a
    fractional job); above one it is rounded up. Rounded rows are counted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = "job_id"
    submit_time: str | None = "submit_time"
    n_gpus: str | None = "num_gpus"
    duration_s: str | None = "duration"
    start_time: str | None = None
    end_time: str | None = None
    group: str | None = "cluster"
    user: str | None = None
    model: str | None = None
    batch_size: str | None = None
    total_iters: str | None = None
    tags: tuple[str, ...] = ()
    units: dict[str, TimeUnit] = {}
    constants: dict[str, str | int | float] = {}
    skip: RowFilters = RowFilters()
    gpu_scale: float = Field(default=1.0, gt=0.0)
    fractional_gpus: FractionalGpus = "refuse"

    @model_validator(mode="after")
    def _consistent(self) -> ColumnMapping:
        for field in self.units:
            if field not in _TIME_FIELDS:
                raise ValueError(f"units: {field!r} is not a time field; use one of "
                                 f"{', '.join(_TIME_FIELDS)}")
        if self.units.get("duration_s") == "datetime":
            raise ValueError("units: duration_s cannot be a datetime")
        for field in self.constants:
            if field not in _CONSTANT_FIELDS:
                raise ValueError(f"constants: {field!r} cannot be a constant; use one of "
                                 f"{', '.join(_CONSTANT_FIELDS)}")
            if getattr(self, field) is not None:
                raise ValueError(f"constants: {field!r} is also mapped to column "
                                 f"{getattr(self, field)!r}; set it to null to use the constant")
        for field in ("submit_time", "n_gpus"):
            if getattr(self, field) is None and field not in self.constants:
                raise ValueError(f"{field} needs a column or a constant")
        if self.duration_s is None and self.end_time is None:
            raise ValueError("duration_s needs a column, or end_time (minus start_time "
                             "or submit_time)")
        if self.duration_s is not None and self.end_time is not None:
            raise ValueError("map either duration_s or end_time, not both")
        if self.start_time is not None and self.end_time is None:
            raise ValueError("start_time is only used with end_time")
        return self

    @classmethod
    def from_yaml(cls, path: str | Path) -> ColumnMapping:
        """Read a mapping from a YAML file of ``field: column`` pairs."""
        import yaml

        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"cannot read column mapping: {exc}", source=str(path)) from None
        except yaml.YAMLError as exc:
            raise parse_error(exc, str(path), "cannot parse column mapping") from None
        if not isinstance(data, dict):
            raise InputError("a column mapping must be a mapping of field: column",
                             source=str(path))
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or None
            message = str(first["msg"]).removeprefix("Value error, ")
            raise InputError(message, source=str(path), field=field) from None

    def columns(self) -> dict[str, str]:
        """Field -> column for every mapped field."""
        return {field: column for field in _COLUMN_FIELDS
                if (column := getattr(self, field)) is not None}


def read_csv(path: str | Path, mapping: ColumnMapping | None = None, *,
             time_unit: str = "s", strict: bool = False) -> Workload:
    """Read a workload from a CSV file.

    Args:
        path: The file; ``*.gz`` is decompressed.
        mapping: Column names; the default fits the shipped traces.
        time_unit: Unit of the time columns: ``s``, ``ms``, ``us``, ``min`` or ``h``.
        strict: Refuse the file at the first row the mapping's filters would skip.

    Returns:
        The jobs in file order, each remembering its line.

    Raises:
        InputError: naming the file, line and column of the first bad value.
    """
    mapping = mapping or ColumnMapping()
    table = read_table(path, mapping, time_unit=time_unit, strict=strict)
    workload = table_to_workload(table, name=_stem(Path(path)), source=str(path),
                                 n_gpus_field=mapping.n_gpus or "constants.n_gpus")
    workload = with_tags(workload, table)
    skipped = table.attrs.get("skipped", {})
    return dataclasses.replace(workload, n_skipped=sum(skipped.values()),
                               skipped_by_reason=tuple(skipped.items()),
                               n_rounded_up=table.attrs.get("rounded_up", 0))


def read_table(path: str | Path, mapping: ColumnMapping, *, time_unit: str = "s",
               strict: bool = False) -> pd.DataFrame:
    """Read and check a CSV file into a frame with rackwise field names.

    The frame has one column per mapped field (times in seconds) and a
    ``line`` column; rows keep file order. ``frame.attrs["skipped"]`` counts
    the rows the mapping's filters skipped, by reason, and
    ``frame.attrs["rounded_up"]`` the GPU counts rounded up to whole GPUs.
    """
    columns = mapping.columns()
    text_columns = {columns[f]: str for f in _TEXT_FIELDS if f in columns}
    text_columns.update(dict.fromkeys(mapping.tags, str))
    raw = parse_csv(Path(path), text_columns)
    return frame_to_table(raw, mapping, source=str(path), time_unit=time_unit, strict=strict)


def frame_to_table(raw: pd.DataFrame, mapping: ColumnMapping, *, source: str,
                   time_unit: str = "s", strict: bool = False,
                   first_line: int = 2) -> pd.DataFrame:
    """`read_table` on a frame already parsed; row ``i`` of ``raw`` is file line ``i + first_line``.

    Each column of ``mapping.tags`` comes out as a ``tag:<column>`` column (see `with_tags`).
    """
    if time_unit not in TIME_UNITS_S:
        raise InputError(f"unknown time unit {time_unit!r}; use one of "
                         f"{', '.join(TIME_UNITS_S)}", field="time_unit")
    columns = mapping.columns()
    wanted = [*columns.items(), *(("skip", c) for c in mapping.skip.columns()),
              *(("tags", c) for c in mapping.tags)]
    for field, column in wanted:
        if column not in raw.columns:
            raise InputError(f"missing column '{column}' (for {field}); the header has: "
                             f"{', '.join(map(str, raw.columns))}",
                             source=source, line=first_line - 1 or None, field=column)
    raw = raw[list(dict.fromkeys([*columns.values(), *mapping.skip.columns(), *mapping.tags]))]
    blank = raw.isna().all(axis=1)
    if blank.any():  # blank lines: dropped, but the index keeps later line numbers right
        raw = raw[~blank]
    raw, skipped = apply_row_filters(raw, mapping.skip, n_gpus_column=columns.get("n_gpus"),
                                     source=source, strict=strict, first_line=first_line)
    if raw.empty:
        _no_jobs(skipped, source)
    lines = raw.index.to_numpy(dtype=np.int64) + first_line
    out: dict[str, Any] = {"line": lines}
    n_rows = len(raw)

    def seconds(field: str) -> np.ndarray:
        column = columns[field]
        unit = mapping.units.get(field, time_unit)
        if unit == "datetime":
            return _datetime_s(raw, column, source, lines)
        return _number(raw, column, source, lines) * TIME_UNITS_S[unit]

    job_ids = _text(raw, columns["job_id"], source, lines, required=True)
    duplicated = job_ids.duplicated()
    if duplicated.any():
        at = int(np.argmax(duplicated.to_numpy()))
        first = int(np.argmax((job_ids == job_ids.iloc[at]).to_numpy()))
        raise InputError(f"duplicate job id {job_ids.iloc[at]!r} (first on line {lines[first]})",
                         source=source, line=int(lines[at]), field=columns["job_id"])
    out["job_id"] = job_ids.to_numpy(dtype=object)

    submit_is_datetime = "submit_time" in columns and mapping.units.get("submit_time") == "datetime"
    if "submit_time" in columns:
        submit = seconds("submit_time")
        if not submit_is_datetime:
            _require(submit, submit >= 0.0, "must not be negative", columns["submit_time"],
                     source, lines)
    else:
        submit = np.full(n_rows, _constant_number(mapping, "submit_time", source), np.float64)

    if "duration_s" in columns:
        duration = seconds("duration_s")
        duration_column = columns["duration_s"]
    else:
        end = seconds("end_time")
        begin = seconds("start_time") if "start_time" in columns else submit
        duration = end - begin
        duration_column = columns["end_time"]
    keep = np.ones(n_rows, dtype=bool)
    if mapping.skip.zero_duration:
        keep = duration > 0.0
        if strict and not keep.all():
            at = int(np.argmax(~keep))
            raise _fail(f"row skipped as zero_duration: {duration[at]:g} s (--strict refuses "
                        "such rows)", source, int(lines[at]), duration_column)
        skipped["zero_duration"] = int((~keep).sum())
        if not keep.any():
            _no_jobs(skipped, source)
    _require(duration[keep], duration[keep] > 0.0, "must be positive", duration_column, source,
             lines[keep])
    # Epoch seconds only matter relative to the trace's first arrival.
    submit = submit - (float(submit[keep].min()) if submit_is_datetime else 0.0)
    _require(submit[keep], submit[keep] >= 0.0, "must not be negative",
             columns.get("submit_time", ""), source, lines[keep])
    out["submit_time"] = submit
    out["duration_s"] = duration

    rounded_up = 0
    if "n_gpus" in columns and (mapping.fractional_gpus != "refuse" or mapping.gpu_scale != 1.0):
        out["n_gpus"], share, rounded_up = _gpus(raw, columns["n_gpus"], mapping, source, lines)
        if share is not None:
            out["gpu_share"] = share
    elif "n_gpus" in columns:
        out["n_gpus"] = _whole(raw, columns["n_gpus"], source, lines, minimum=1)
    else:
        out["n_gpus"] = np.full(n_rows, _constant_whole(mapping, "n_gpus", source), np.int64)
    if "batch_size" in columns:
        out["batch_size"] = _whole(raw, columns["batch_size"], source, lines, minimum=1)
    elif "batch_size" in mapping.constants:
        out["batch_size"] = np.full(n_rows, _constant_whole(mapping, "batch_size", source),
                                    np.int64)
    if "total_iters" in columns:
        iters = _number(raw, columns["total_iters"], source, lines)
        _require(iters, iters > 0.0, "must be positive", columns["total_iters"], source, lines)
        out["total_iters"] = iters
    elif "total_iters" in mapping.constants:
        out["total_iters"] = np.full(n_rows, _constant_number(mapping, "total_iters", source),
                                     np.float64)
    for field in ("group", "user", "model"):
        if field in columns:
            values = _text(raw, columns[field], source, lines, required=False)
            out[field] = values.astype(object).where(values.notna(), None).to_numpy(dtype=object)
        elif field in mapping.constants:
            out[field] = np.full(n_rows, str(mapping.constants[field]), dtype=object)
    for column in mapping.tags:
        out[f"tag:{column}"] = np.array([None if pd.isna(value) else str(value)
                                         for value in raw[column].tolist()], dtype=object)
    table = pd.DataFrame(out)
    if not keep.all():
        table = table[keep].reset_index(drop=True)
    table.attrs["skipped"] = skipped
    table.attrs["rounded_up"] = rounded_up
    return table


def _no_jobs(skipped: dict[str, int], source: str) -> None:
    if sum(skipped.values()):
        raise InputError(f"no jobs left after skipping rows: {format_skipped(skipped)}",
                         source=source)
    raise InputError("no jobs: the file has only a header", source=source)


def with_tags(workload: Workload, table: pd.DataFrame) -> Workload:
    """``workload`` with the ``tag:<column>`` columns of its frame as job tags (empty cells: none)."""
    tag_columns = [name for name in table.columns if name.startswith("tag:")]
    if not tag_columns:
        return workload
    names = [name.removeprefix("tag:") for name in tag_columns]
    rows = zip(*(table[name].tolist() for name in tag_columns))
    jobs = tuple(job.with_changes(tags=tuple((name, str(value))
                                             for name, value in zip(names, values)
                                             if not pd.isna(value)))
                 for job, values in zip(workload.jobs, rows))
    return dataclasses.replace(workload, jobs=jobs)


# --------------------------------------------------------------------------- helpers


def parse_csv(path: Path, text_columns: Mapping[str, type], *, sep: str = ",",
              names: Sequence[str] | None = None) -> pd.DataFrame:
    """The raw rows of a CSV file (``names``: its columns, for a file without a header line)."""
    compression = "gzip" if path.suffix == ".gz" else None
    try:
        # Only an empty cell is missing: "nan", "NA" or "null" are what the file says, and a
        # number column refuses them by name rather than calling them empty.
        return pd.read_csv(path, sep=sep, dtype=text_columns, compression=compression,
                           header=None if names is not None else "infer", names=names,
                           skip_blank_lines=False, skipinitialspace=True,
                           keep_default_na=False, na_values=[""])
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


def _gpus(raw: pd.DataFrame, column: str, mapping: ColumnMapping, source: str,
          lines: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, int]:
    """GPU counts scaled by ``gpu_scale``, fractions treated as ``fractional_gpus`` says.

    Returns whole GPU counts, the shares of one GPU (``share`` only) and the
    number of counts rounded up.
    """
    gpus = _number(raw, column, source, lines) * mapping.gpu_scale
    _require(gpus, gpus > 0.0, "must be positive", column, source, lines)
    # Scaling by 0.01 leaves 1e-16 residues on whole counts: a millionth of a GPU is whole.
    nearest = np.round(gpus)
    fractional = np.abs(gpus - nearest) > 1e-6
    gpus = np.where(fractional, gpus, nearest)
    if mapping.fractional_gpus == "refuse" and fractional.any():
        at = int(np.argmax(fractional))
        raise _fail(f"not a whole number of GPUs: {gpus[at]:g} (set fractional_gpus: round_up "
                    f"or share in the mapping)", source, int(lines[at]), column)
    share = None
    if mapping.fractional_gpus == "share":
        below_one = gpus < 1.0
        share = np.where(below_one, gpus, 1.0)
        fractional &= ~below_one
    return np.ceil(gpus).astype(np.int64), share, int(fractional.sum())


def _constant_number(mapping: ColumnMapping, field: str, source: str) -> float:
    value = mapping.constants[field]
    if isinstance(value, str) or not np.isfinite(value) or value < 0:
        raise InputError(f"constant must be a non-negative number, got {value!r}",
                         source=source, field=f"constants.{field}")
    return float(value)


def _constant_whole(mapping: ColumnMapping, field: str, source: str) -> int:
    value = _constant_number(mapping, field, source)
    if value != int(value) or value < 1:
        raise InputError(f"constant must be a whole number of at least 1, got {value:g}",
                         source=source, field=f"constants.{field}")
    return int(value)


def _datetime_s(raw: pd.DataFrame, column: str, source: str, lines: np.ndarray) -> np.ndarray:
    """Seconds since the Unix epoch of date-time strings (naive ones read as UTC)."""
    values = raw[column]
    missing = values.isna().to_numpy()
    if missing.any():
        at = int(np.argmax(missing))
        raise _fail("empty value", source, int(lines[at]), column)
    parsed = pd.to_datetime(values.astype(str), errors="coerce", utc=True, format="mixed")
    bad = parsed.isna().to_numpy()
    if bad.any():
        at = int(np.argmax(bad))
        raise _fail(f"not a date-time: {values.iloc[at]!r}", source, int(lines[at]), column)
    epoch = pd.Timestamp(0, tz="UTC")
    seconds: np.ndarray = ((parsed - epoch) / pd.Timedelta(seconds=1)).to_numpy(
        dtype=np.float64)
    return seconds


def _require(values: np.ndarray, ok: np.ndarray, message: str, column: str, source: str,
             lines: np.ndarray) -> None:
    if not ok.all():
        at = int(np.argmax(~ok))
        raise _fail(f"{message}, got {values[at]:g}", source, int(lines[at]), column)
