"""``rackwise train-marl``: train the MARL placement agents and write a checkpoint (rl extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rackwise.cli.errors import reported


def train_marl(
    out: Annotated[Path, typer.Option(
        help="Folder for marl.pt, marl.npz, marl.json and the training curve.")] = Path("results/marl"),
    updates: Annotated[int, typer.Option(help="PPO updates.")] = 40,
    episodes_per_update: Annotated[int, typer.Option(help="Episodes rolled out per update.")] = 4,
    n_jobs: Annotated[int, typer.Option(help="Jobs per episode.")] = 200,
    load: Annotated[float, typer.Option(help="Offered load of each episode.")] = 0.9,
    agents: Annotated[int, typer.Option(help="Scheduler agents sharing the cluster.")] = 4,
    nodes: Annotated[int, typer.Option(help="Servers of the training cluster.")] = 16,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per server.")] = 8,
    nodes_per_rack: Annotated[int, typer.Option(help="Servers per rack.")] = 4,
    sources: Annotated[str, typer.Option(
        help="Comma-separated episode sources: a trace name (its training windows) or synthetic:TRACE.")
    ] = "philly_2017,synthetic:philly_2017,itp_2021,synthetic:itp_2021",
    bc_episodes: Annotated[int, typer.Option(help="Teacher episodes for the warm start (0: none).")] = 8,
    interference_samples: Annotated[int, typer.Option(help="Co-location samples for the interference model.")] = 6000,
    seed: Annotated[int, typer.Option(help="Seed of the whole run.")] = 0,
) -> None:
    """Train the MARL scheduler (MAPPO, hierarchical GNN) on CPU; needs the rl extra.

    Example: rackwise train-marl --out results/marl --updates 40
    Use the result with: rackwise simulate --policy marl -p checkpoint=results/marl/marl
    """
    console = Console()
    with reported():
        from rackwise.rl.mappo import TrainConfig, train

        cfg = TrainConfig(updates=updates, episodes_per_update=episodes_per_update, n_jobs=n_jobs,
                          load=load, n_agents=agents, n_nodes=nodes, gpus_per_node=gpus_per_node,
                          nodes_per_rack=nodes_per_rack,
                          sources=tuple(s.strip() for s in sources.split(",") if s.strip()),
                          bc_episodes=bc_episodes, interference_samples=interference_samples,
                          seed=seed)
        checkpoint = train(cfg, out, log=console.print)
    summary = checkpoint.config.training
    console.print(f"trained in {summary['wall_s']:.0f} s; return {summary['first_return']:.2f} -> "
                  f"{summary['last_return']:.2f}; checkpoint {out / 'marl.pt'}, curve "
                  f"{out / 'training_curve.png'}")
