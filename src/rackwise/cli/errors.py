"""How the CLI reports rackwise's named errors: one line on stderr, exit code 2."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import typer

from rackwise.errors import RackwiseError

T = TypeVar("T")


@contextmanager
def reported() -> Iterator[None]:
    """Turn a `RackwiseError` into ``error: <message>`` and exit code 2."""
    try:
        yield
    except RackwiseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(code=2) from None


def call(function: Callable[[], T]) -> T:
    with reported():
        return function()
