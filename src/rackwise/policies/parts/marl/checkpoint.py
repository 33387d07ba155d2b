"""Checkpoints: network weights (``.pt``, state dicts only) beside their config (``.json``).

A checkpoint is three files with one stem: ``marl.pt`` holds the actor-critic
and interference-model weights, ``marl.json`` the configuration they were
built with and a summary of the training run, and ``marl.npz`` the same
weights as numpy arrays, all a run of ``marl`` reads (`load_weights`): it
needs no torch. Training resumes from the ``.pt`` file (`load`), read with
``torch.load(weights_only=True)``: no pickled code is executed. `export`
writes the ``.npz`` file of a checkpoint that has none.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rackwise.errors import InputError
from rackwise.policies.parts.marl import require
from rackwise.policies.parts.marl.inference import ActorLayers
from rackwise.policies.parts.marl.pair_terms import PairTerms

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


@dataclass
class Weights:
    """What a run of ``marl`` reads: the config, the actor-critic's state dict, and what it
    runs, read from them once: the actor's layers and the interference model's pair terms."""

    config: ModelConfig
    actor_critic: dict[str, np.ndarray]
    actor: ActorLayers
    pair_terms: PairTerms


def save(path: str | Path, checkpoint: Checkpoint) -> tuple[Path, Path]:
    """Write ``<stem>.pt``, ``<stem>.npz`` and ``<stem>.json``; returns the first and the last."""
    torch = require("torch")
    stem = Path(path).with_suffix("")
    stem.parent.mkdir(parents=True, exist_ok=True)
    weights, config = stem.with_suffix(".pt"), stem.with_suffix(".json")
    states = {"actor_critic": checkpoint.actor_critic.state_dict(),
              "interference": checkpoint.predictor.model.state_dict()}
    torch.save(states, weights)
    _write_arrays(stem, states)
    config.write_text(json.dumps(asdict(checkpoint.config), indent=2, sort_keys=True) + "\n",
                      encoding="utf-8")
    return weights, config


def export(path: str | Path | None = None) -> Path:
    """Write ``<stem>.npz`` from ``<stem>.pt`` (default: the shipped checkpoint); needs torch.

    The shipped ``marl.npz`` is made this way:
    ``python -c "from rackwise.policies.parts.marl.checkpoint import export; export()"``.
    """
    torch = require("torch")
    stem = _stem(path)
    weights = stem.with_suffix(".pt")
    _require_file(weights)
    return _write_arrays(stem, torch.load(weights, map_location="cpu", weights_only=True))


def _write_arrays(stem: Path, states: dict[str, Any]) -> Path:
    arrays = {f"{part}/{name}": tensor.detach().cpu().numpy()
              for part, state in states.items() for name, tensor in state.items()}
    target = stem.with_suffix(".npz")
    np.savez(target, **arrays)
    return target


def load_weights(path: str | Path | None = None) -> Weights:
    """Read a checkpoint's config and ``.npz`` weights (default: the shipped one), without torch.

    Raises:
        InputError: a file is missing or unreadable, or a layer of either network is not there.
    """
    stem = _stem(path)
    arrays_path = stem.with_suffix(".npz")
    config = _read_config(stem)
    if not arrays_path.is_file():
        hint = f"; write it with export({str(stem)!r})" if stem.with_suffix(".pt").is_file() else ""
        raise InputError(f"no such checkpoint file{hint}", source=str(arrays_path))
    try:
        with arrays_path.open("rb") as handle:  # closed here whatever np.load makes of it
            stored = np.load(handle, allow_pickle=False)
            if not isinstance(stored, np.lib.npyio.NpzFile):
                raise ValueError("one array, not a .npz archive")
            parts: dict[str, dict[str, np.ndarray]] = {"actor_critic": {}, "interference": {}}
            for key in stored.files:
                part, _, name = key.partition("/")
                parts.setdefault(part, {})[name] = stored[key]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"not a readable .npz file of weights ({type(exc).__name__})",
                         source=str(arrays_path)) from None
    try:
        actor = ActorLayers.of(parts["actor_critic"])
    except KeyError as exc:
        raise InputError(f"weights do not match the actor: no {exc}", source=str(arrays_path)) from None
    try:
        pair_terms = PairTerms(parts["interference"])
    except KeyError as exc:
        raise InputError(f"weights do not match the interference model: no {exc}",
                         source=str(arrays_path)) from None
    return Weights(config, parts["actor_critic"], actor, pair_terms)


def _stem(path: str | Path | None) -> Path:
    """A checkpoint's path without its suffix (None: the shipped one)."""
    return Path(path).with_suffix("") if path is not None else SHIPPED


def _require_file(path: Path) -> None:
    if not path.is_file():
        raise InputError("no such checkpoint file; train one with `rackwise train-marl`", source=str(path))


def _read_config(stem: Path) -> ModelConfig:
    config_path = stem.with_suffix(".json")
    _require_file(config_path)
    try:
        return ModelConfig(**json.loads(config_path.read_text(encoding="utf-8")))
    except (TypeError, ValueError) as exc:
        raise InputError(f"bad checkpoint config: {exc}", source=str(config_path)) from None


def load(path: str | Path | None = None) -> Checkpoint:
    """Read a checkpoint (default: the one shipped with rackwise).

    Raises:
        InputError: a file is missing or does not match its config.
        MissingExtraError: torch is not installed.
    """
    torch = require("torch")
    from rackwise.policies.parts.marl.encoder import ActorCritic
    from rackwise.policies.parts.marl.interference import InterferenceModel, Predictor

    stem = _stem(path)
    weights = stem.with_suffix(".pt")
    _require_file(weights)
    config = _read_config(stem)
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
