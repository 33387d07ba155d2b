"""Parsing ``key=value`` flags into typed parameters."""

from __future__ import annotations

from typing import Any

from rackwise.errors import InputError


def parse_params(pairs: list[str] | None, flag: str) -> dict[str, Any]:
    """``["a=1", "b=x,y"]`` -> ``{"a": 1, "b": "x,y"}``; values are read as YAML scalars/lists."""
    params: dict[str, Any] = {}
    if not pairs:
        return params
    import yaml  # only with values to read: most runs give none

    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"expected key=value, got '{pair}'", field=flag)
        try:
            params[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            raise InputError(f"cannot read the value of '{key}': {raw!r}", field=flag) from None
    return params
