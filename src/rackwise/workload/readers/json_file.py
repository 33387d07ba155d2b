"""Read a JSON trace file (``*.gz`` decompressed), with one-line errors naming the file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from rackwise.errors import InputError


def read_json(path: Path, expected: str) -> Any:
    """The parsed contents of ``path``; ``expected`` words what an empty file should have held."""
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except FileNotFoundError:
        raise InputError("no such file", source=str(path)) from None
    except (OSError, EOFError) as exc:
        raise InputError(f"cannot read file: {exc}", source=str(path)) from None
    if not raw.strip():
        raise InputError(f"empty file: expected {expected}", source=str(path))
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InputError(f"not valid JSON: {exc}", source=str(path),
                         line=getattr(exc, "lineno", None)) from None
