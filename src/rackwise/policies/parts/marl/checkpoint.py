"""Checkpoints: network weights (``.pt``, state dicts only) beside their config (``.json``).

A checkpoint is two files with one stem: ``marl.pt`` holds the actor-critic
and interference-model weights, ``marl.json`` the configuration they were
built with and a summary of the training run. Loading uses
``torch.load(weights_only=True)``: no pickled code is executed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rackwise.errors import InputError
from rackwise.policies.parts.marl import require

SHIPPED = Path(__file__).parent / "data" / "marl"


@dataclass
class ModelConfig:
    """What is needed to rebuild the networks and the features they expect."""

    n_agents: int = 4
    hidden: int = 32
    head_hidden: int = 64
    shaping_coef: float = 0.5
    allow_wait: bool = False
    training: dict[str, Any] = field(default_factory=dict)


@dataclass
class Checkpoint:
    config: ModelConfig
    actor_critic: Any  # ActorCritic
    predictor: Any  # Predictor


def save(path: str | Path, checkpoint: Checkpoint) -> tuple[Path, Path]:
    """Write ``<stem>.pt`` and ``<stem>.json``; returns both paths."""
    torch = require("torch")
    stem = Path(path).with_suffix("")
    stem.parent.mkdir(parents=True, exist_ok=True)
    weights, config = stem.with_suffix(".pt"), stem.with_suffix(".json")
    torch.save({"actor_critic": checkpoint.actor_critic.state_dict(),
                "interference": checkpoint.predictor.model.state_dict()}, weights)
    config.write_text(json.dumps(asdict(checkpoint.config), indent=2, sort_keys=True) + "\n",
                      encoding="utf-8")
    return weights, config


def load(path: str | Path | None = None) -> Checkpoint:
    """Read a checkpoint (default: the one shipped with rackwise).

    Raises:
        InputError: a file is missing or does not match its config.
        MissingExtraError: torch is not installed.
    """
    torch = require("torch")
    from rackwise.policies.parts.marl.encoder import ActorCritic
    from rackwise.policies.parts.marl.interference import InterferenceModel, Predictor

    stem = Path(path).with_suffix("") if path is not None else SHIPPED
    weights, config_path = stem.with_suffix(".pt"), stem.with_suffix(".json")
    for item in (weights, config_path):
        if not item.is_file():
            raise InputError("no such checkpoint file; train one with `rackwise train-marl`",
                             source=str(item))
    try:
        config = ModelConfig(**json.loads(config_path.read_text(encoding="utf-8")))
    except (TypeError, ValueError) as exc:
        raise InputError(f"bad checkpoint config: {exc}", source=str(config_path)) from None
    state = torch.load(weights, map_location="cpu", weights_only=True)
    model = ActorCritic(config.n_agents, config.hidden, config.head_hidden)
    interference = InterferenceModel()
    try:
        model.load_state_dict(state["actor_critic"])
        interference.load_state_dict(state["interference"])
    except (KeyError, RuntimeError) as exc:
        raise InputError(f"weights do not match the config: {str(exc).splitlines()[0]}",
                         source=str(weights)) from None
    model.eval()
    interference.eval()
    return Checkpoint(config, model, Predictor(interference))
