"""Options shared by the commands that run simulations (`simulate`, `compare`).

Declared once so their names, types and help read the same everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Trace = Annotated[str | None, typer.Option(help="A shipped trace (see `rackwise traces list`).")]
TraceFile = Annotated[Path | None, typer.Option(help="Or a trace file of your own.")]
TraceFormat = Annotated[str, typer.Option("--format", help=(
    "Format of --trace-file: csv (with --mapping), gavel, or a preset: philly (or philly-json), "
    "pai, helios, sacct, k8s-pods."))]
Mapping = Annotated[Path | None, typer.Option(help="YAML column mapping for a csv --trace-file.")]
Groups = Annotated[str | None, typer.Option(help="Keep only these clusters/virtual clusters (comma-separated).")]
StartS = Annotated[float | None, typer.Option(help="Keep jobs submitted at or after this second.")]
EndS = Annotated[float | None, typer.Option(help="Keep jobs submitted before this second.")]
FirstN = Annotated[int | None, typer.Option(help="Keep only the first N jobs (after the other filters).")]
SkipOversized = Annotated[bool, typer.Option(help="Drop jobs larger than the cluster instead of failing.")]
Load = Annotated[float, typer.Option(
    help="Arrival-rate factor: gaps between submissions are divided by it (2 = twice as busy).")]
HistoryJobs = Annotated[int, typer.Option(
    min=0, help="Give the policy the cluster's log: the N jobs that last finished before --start-s "
                "(predictors learn from it).")]
Strict = Annotated[bool, typer.Option(help="Refuse a trace file at the first row its mapping would skip.")]
GpuShares = Annotated[bool, typer.Option(
    help="Run requests for part of one GPU (csv, pai) as fractional jobs instead of rounding up.")]
Cluster = Annotated[Path | None, typer.Option(help="Cluster spec file (YAML or TOML); overrides the flags below.")]
Nodes = Annotated[int, typer.Option(help="Nodes in a homogeneous cluster.")]
GpusPerNode = Annotated[int, typer.Option(help="GPUs per node.")]
NodesPerRack = Annotated[int, typer.Option(help="Nodes per rack.")]
GpuType = Annotated[str, typer.Option(help="GPU type of every node.")]
Perf = Annotated[str, typer.Option(help="Performance model: ideal (trace speeds) or network.")]
PerfParam = Annotated[list[str] | None, typer.Option(help="Performance-model parameter key=value (repeatable).")]
