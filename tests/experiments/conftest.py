"""Shared pieces of the experiment tests: the repository's experiments folder and a CLI app."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from rackwise.cli import compare, reproduce, sweep

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture
def cli() -> typer.Typer:
    """The three experiment commands on an app of their own (the main app mounts them too)."""
    app = typer.Typer(pretty_exceptions_enable=False)
    app.command("compare")(compare.compare)
    app.command("sweep")(sweep.sweep)
    app.command("reproduce")(reproduce.reproduce)
    return app
