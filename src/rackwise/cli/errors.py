"""How the CLI reports rackwise's named errors: one line on stderr, exit code 2."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import typer
from pydantic import ValidationError

from rackwise.errors import RackwiseError

T = TypeVar("T")


def flattened(exc: ValidationError) -> str:
    """A pydantic error as ``field: message; field: message`` on one line, without its URL."""
    parts = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"])
        parts.append(f"{field}: {error['msg']}" if field else error["msg"])
    return "; ".join(parts)


@contextmanager
def reported() -> Iterator[None]:
    """Turn a `RackwiseError` or a pydantic `ValidationError` into ``error: <message>`` and exit code 2."""
    try:
        yield
    except RackwiseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(code=2) from None
    except ValidationError as exc:
        print(f"error: {flattened(exc)}", file=sys.stderr)
        raise typer.Exit(code=2) from None


def call(function: Callable[[], T]) -> T:
    with reported():
        return function()
