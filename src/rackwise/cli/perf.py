"""``rackwise perf``: ask the performance model how fast a model trains on a placement."""

from __future__ import annotations

import re
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from rackwise.cli.errors import reported
from rackwise.cluster.topology import Links, Topology, uniform_cluster
from rackwise.errors import InputError
from rackwise.perf.breakdown import IterationBreakdown
from rackwise.perf.catalogue import CATALOGUE, resolve_model
from rackwise.perf.model import NetworkPerf
from rackwise.workload.job import Job, Parallelism

app = typer.Typer(help="Inspect the performance model: step time, communication, bottlenecks.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

_SPREAD = re.compile(r"^(\d+)-(node|nodes|rack|racks)$")


def parse_spread(spread: str) -> tuple[int, str]:
    """``"2-nodes"`` -> ``(2, "node")``; ``"3-racks"`` -> ``(3, "rack")``."""
    match = _SPREAD.match(spread.strip().lower())
    if match is None or int(match.group(1)) < 1:
        raise InputError(f"spread '{spread}' is not like 1-node, 2-nodes or 2-racks", field="spread")
    return int(match.group(1)), match.group(2).rstrip("s")


def build_placement(n_gpus: int, spread: str, gpus_per_node: int, nodes_per_rack: int,
                    gpu_type: str, links: Links) -> tuple[Topology, tuple[int, ...]]:
    """A cluster just big enough, and ``n_gpus`` GPUs spread as asked.

    ``k-nodes``: the GPUs split as evenly as possible over k nodes of one rack.
    ``k-racks``: split evenly over k racks, each share on as few nodes as it fits.
    """
    count, unit = parse_spread(spread)
    if n_gpus < 1:
        raise InputError(f"need at least 1 GPU, got {n_gpus}", field="gpus")
    if count > n_gpus:
        raise InputError(f"cannot spread {n_gpus} GPU(s) over {count} {unit}s", field="spread")
    shares = [n_gpus // count + (1 if i < n_gpus % count else 0) for i in range(count)]
    if unit == "node":
        if count > nodes_per_rack:
            raise InputError(f"{count} nodes do not fit in one rack of {nodes_per_rack}", field="spread")
        if shares[0] > gpus_per_node:
            raise InputError(f"{shares[0]} GPUs do not fit on one node of {gpus_per_node}",
                             field="spread")
        topology = uniform_cluster(nodes_per_rack, gpus_per_node, nodes_per_rack, gpu_type, links)
        gpu_ids = [node * gpus_per_node + g for node, share in enumerate(shares) for g in range(share)]
        return topology, tuple(gpu_ids)
    rack_gpus = gpus_per_node * nodes_per_rack
    if shares[0] > rack_gpus:
        raise InputError(f"{shares[0]} GPUs do not fit in one rack of {rack_gpus}", field="spread")
    topology = uniform_cluster(count * nodes_per_rack, gpus_per_node, nodes_per_rack, gpu_type, links)
    gpu_ids = [rack * rack_gpus + g for rack, share in enumerate(shares) for g in range(share)]
    return topology, tuple(gpu_ids)


def parallelism_of(n_gpus: int, tensor: int, pipeline: int) -> Parallelism | None:
    """The data x tensor x pipeline split of ``n_gpus`` (None: plain data parallel)."""
    for flag, value in (("tensor", tensor), ("pipeline", pipeline)):
        if value < 1:
            raise InputError(f"must be >= 1, got {value}", field=flag)
    if tensor == pipeline == 1:
        return None
    if n_gpus % (tensor * pipeline):
        raise InputError(f"{n_gpus} GPUs do not split into tensor {tensor} x pipeline {pipeline}",
                         field="gpus")
    return Parallelism(n_gpus // (tensor * pipeline), tensor, pipeline)


def explain_placement(model: str, n_gpus: int, spread: str, *, gpu_type: str = "v100",
                      batch_size: int | None = None, gpus_per_node: int = 8,
                      nodes_per_rack: int = 8, links: Links | None = None,
                      tensor: int = 1, pipeline: int = 1,
                      ) -> tuple[Job, Topology, IterationBreakdown]:
    """The breakdown ``explain`` prints, as data.

    With ``tensor`` or ``pipeline`` above 1, worker ``v`` of the job graph
    (tensor groups first) runs on the ``v``-th GPU of the spread.
    """
    spec = resolve_model(model, batch_size)
    par = parallelism_of(n_gpus, tensor, pipeline)
    topology, gpu_ids = build_placement(n_gpus, spread, gpus_per_node, nodes_per_rack,
                                        gpu_type.strip().lower(), links or Links())
    perf = NetworkPerf(assign_models=False)
    job = Job("explain", 0.0, n_gpus, 1.0, model=spec.name, parallelism=par)
    (job,) = perf.prepare([job], topology, np.random.default_rng(0))
    return job, topology, perf.iteration_breakdown(job, gpu_ids, {})


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms"


@app.command("explain")
def explain(
    model: Annotated[str, typer.Option(
        help="Model name or alias: resnet50, transformer, lm, bert-large, gpt2, gpt3 ...")],
    gpus: Annotated[int, typer.Option(help="GPUs the job uses.")] = 8,
    tensor: Annotated[int, typer.Option(help="Tensor-parallel degree (GPUs per tensor group).")] = 1,
    pipeline: Annotated[int, typer.Option(help="Pipeline stages.")] = 1,
    spread: Annotated[str, typer.Option(help="Where they are: 1-node, 2-nodes, 2-racks ...")] = "1-node",
    gpu_type: Annotated[str, typer.Option("--gpu-type", help="v100, p100, k80, a100, h100.")] = "v100",
    batch_size: Annotated[int | None, typer.Option(help="Batch size of a measured model.")] = None,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node.")] = 8,
    nodes_per_rack: Annotated[int, typer.Option(help="Nodes per rack.")] = 8,
    intra_node_gbps: Annotated[float, typer.Option(help="NVLink/PCIe bandwidth, Gb/s.")] = Links().intra_node_gbps,
    intra_rack_gbps: Annotated[float, typer.Option(help="Node NIC to top-of-rack, Gb/s.")] = Links().intra_rack_gbps,
    cross_rack_gbps: Annotated[float, typer.Option(help="Cross-rack path, Gb/s.")] = Links().cross_rack_gbps,
) -> None:
    """Break one training step into compute, communication and interference."""
    with reported():
        for flag, value in (("intra-node-gbps", intra_node_gbps), ("intra-rack-gbps", intra_rack_gbps),
                            ("cross-rack-gbps", cross_rack_gbps)):
            if not value > 0:
                raise InputError(f"must be > 0, got {value}", field=flag)
        links = Links(intra_node_gbps, intra_rack_gbps, cross_rack_gbps)
        job, _, b = explain_placement(model, gpus, spread, gpu_type=gpu_type,
                                      batch_size=batch_size, gpus_per_node=gpus_per_node,
                                      nodes_per_rack=nodes_per_rack, links=links,
                                      tensor=tensor, pipeline=pipeline)
    spec = CATALOGUE[job.model or ""]
    count, unit = parse_spread(spread)
    par = job.parallelism
    split = "" if par is None else f" (data {par.data} x tensor {par.tensor} x pipeline {par.pipeline})"
    table = Table(title=f"{spec.name} on {gpus} x {gpu_type.lower()}{split}, {count} {unit}(s)",
                  show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    table.add_row("parameters", f"{spec.params / 1e6:,.1f} M")
    table.add_row("gradient bytes per step", f"{job.gradient_bytes / 1e6:,.1f} MB")
    table.add_row("compute per step", _ms(b.compute_s))
    table.add_row("communication per step", _ms(b.comm_s))
    link = b.bottleneck if b.comm_s == 0 else f"{b.bottleneck} at {b.bandwidth_gbps:,.0f} Gb/s"
    table.add_row("bottleneck link", link)
    table.add_row("interference factor", f"{b.interference_factor:.3f} (alone)")
    table.add_row("iteration time", _ms(b.iteration_s))
    table.add_row("throughput", f"{b.throughput_iters_per_s:,.3f} steps/s")
    table.add_row("consolidated iteration time", _ms(b.consolidated_iteration_s))
    table.add_row("slowdown vs consolidated", f"{b.slowdown:.3f}x")
    table.add_row("communication share of step", f"{b.comm_s / b.iteration_s:.1%}")
    table.add_row("communication sensitivity", f"{job.comm_sensitivity:.3f}")
    if spec.measured and par is None:
        from rackwise.perf.throughput import default_table

        measured = default_table()
        variants: list[tuple[str, bool]] = [("table, consolidated", True), ("table, unconsolidated", False)]
        for row, consolidated in variants:
            steps = measured.measured(spec.name, gpus, gpu_type.lower(), consolidated=consolidated)
            if steps is not None:
                table.add_row(row, f"{steps:,.3f} steps/s")
    Console().print(table)


@app.command("models")
def models() -> None:
    """List the model catalogue with sizes and bytes per step."""
    table = Table(title="Model catalogue")
    for column in ("model", "params (M)", "gradient MB/step", "checkpoint MB", "source of speed"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for spec in CATALOGUE.values():
        table.add_row(spec.name, f"{spec.params / 1e6:,.1f}", f"{spec.gradient_bytes / 1e6:,.1f}",
                      f"{spec.checkpoint_bytes / 1e6:,.1f}", "measured" if spec.measured else "FLOPs")
    Console().print(table)
