"""``rackwise policies [NAME]``: the registered policies, or one policy's parameters."""

from __future__ import annotations

import re
from dataclasses import MISSING, fields
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from rackwise.cli.errors import reported
from rackwise.errors import MissingExtraError
from rackwise.policies.parts.placement import PLACEMENTS
from rackwise.policies.registry import all_policies, policy_class


def _summary(cls: type) -> str:
    """The first line of the class docstring, without its reST inline markup."""
    doc = (cls.__doc__ or "").strip()
    first = doc.splitlines()[0] if doc else ""
    return re.sub(r"`+([^`]+)`+", r"\1", first)


def _parameter_sets(cls: type) -> list[type]:
    """The shared parameter dataclasses a policy lists among its bases (they live in `policies.parts`)."""
    return [base for base in cls.__mro__[1:] if base.__module__.startswith("rackwise.policies.parts.")]


def list_policies(
    name: Annotated[str | None, typer.Argument(help="Show this policy's parameters.")] = None,
) -> None:
    """List the policies (or one policy's parameters and defaults) and the placement strategies."""
    console = Console()
    if name is not None:
        with reported():
            cls = policy_class(name)
        table = Table(title=f"{name}: {_summary(cls)}")
        table.add_column("parameter (--param key=value)", style="bold")
        table.add_column("default")
        for f in fields(cls):
            if f.init:
                default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[operator]
                table.add_row(f.name, repr(default))
        console.print(table)
        for documented in (cls, *_parameter_sets(cls)):
            console.print((documented.__doc__ or "").strip())
        return
    table = Table(title="Policies (rackwise simulate --policy NAME; rackwise policies NAME for parameters)")
    table.add_column("name", style="bold")
    table.add_column("preempts")
    table.add_column("oracle")
    table.add_column("summary")
    for policy in sorted(all_policies()):
        try:
            cls = policy_class(policy)
        except (ImportError, MissingExtraError) as exc:
            table.add_row(policy, "", "", f"[red]unavailable: {exc}[/red]")
            continue
        table.add_row(policy, "yes" if cls.preempts else "", "yes" if cls.needs_oracle else "", _summary(cls))
    console.print(table)
    console.print(f"Placement strategies (--param placement=NAME): {', '.join(PLACEMENTS)}")
