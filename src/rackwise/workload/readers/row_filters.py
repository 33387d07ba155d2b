"""Rows of a trace that a mapping declares out of scope, skipped and counted by reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, model_validator

from rackwise.errors import InputError


class RowFilters(BaseModel):
    """Which rows to skip; each skipped row is counted under the first reason it meets.

    Reasons: ``zero_gpus`` (the GPU column is 0), ``status`` (the status
    column's value is not in ``allowed_status``), ``missing_<column>`` (an
    empty value in one of ``required`` columns), ``zero_duration`` (a run
    time, read or derived, of zero or less; checked last, by the reader).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    zero_gpus: bool = False
    status: str | None = None
    allowed_status: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    zero_duration: bool = False

    @model_validator(mode="after")
    def _status_pair(self) -> RowFilters:
        if (self.status is None) != (not self.allowed_status):
            raise ValueError("status and allowed_status go together")
        return self

    def columns(self) -> list[str]:
        """The file columns the filters read besides the mapped fields."""
        return [*([self.status] if self.status else []), *self.required]


def apply_row_filters(raw: pd.DataFrame, filters: RowFilters, *, n_gpus_column: str | None,
                      source: str, strict: bool,
                      first_line: int = 2) -> tuple[pd.DataFrame, dict[str, int]]:
    """Drop the rows `filters` skips; return the kept rows and the count per reason.

    Row ``i`` of ``raw`` is file line ``i + first_line``. With ``strict``, the
    first such row is an `InputError` naming its line and column.
    """
    skip = np.zeros(len(raw), dtype=bool)
    counts: dict[str, int] = {}
    checks: list[tuple[str, str, np.ndarray]] = []
    if filters.zero_gpus and n_gpus_column is not None:
        gpus = pd.to_numeric(raw[n_gpus_column], errors="coerce")
        checks.append(("zero_gpus", n_gpus_column, (gpus == 0).to_numpy()))
    if filters.status is not None:
        values = raw[filters.status].astype("string").str.strip()
        allowed = values.isin(filters.allowed_status).fillna(False).to_numpy(dtype=bool)
        checks.append(("status", filters.status, ~allowed))
    for column in filters.required:
        checks.append((f"missing_{column}", column, raw[column].isna().to_numpy()))
    for reason, column, hit in checks:
        new = hit & ~skip
        if strict and new.any():
            at = int(np.argmax(new))
            value = raw[column].iloc[at]
            value = value.item() if isinstance(value, np.generic) else value
            raise InputError(f"row skipped as {reason}: {value!r} "
                             "(--strict refuses such rows)", source=source,
                             line=int(raw.index[at]) + first_line, field=column)
        counts[reason] = int(new.sum())
        skip |= new
    return raw[~skip], counts


def format_skipped(counts: dict[str, int]) -> str:
    """One line: ``skipped 12 rows (zero_gpus 10, status 2)``."""
    total = sum(counts.values())
    parts = ", ".join(f"{reason} {count}" for reason, count in counts.items() if count)
    return f"skipped {total} rows" + (f" ({parts})" if parts else "")

