"""The model catalogue: what a job trains, and the bytes that follow from it.

Two kinds of entries:

* the 26 job types of the measured throughput table (Gavel's job table:
  ResNet-18 on CIFAR-10, ResNet-50 on ImageNet, Transformer on Multi30k,
  an LSTM language model on Wikitext-2, Recoder on ML-20M, A3C on Pong and
  CycleGAN), whose speed comes from the table; and
* large language models with published parameter counts (BERT-Large,
  Devlin et al. 2019: 340 M; GPT-2 XL, Radford et al. 2019: 1,542 M; the
  6.7 B configuration of Brown et al. 2020, Table 2.1), whose compute time
  is estimated from FLOPs (6 x parameters x tokens per step).

Parameter counts of the measured types are the published architectures'
(ResNet-18/50, CycleGAN) or our own estimates from the configurations the
table was measured with (Transformer, LM, Recommendation, A3C); the docs
mark which is which. Bytes per parameter follow the optimiser and precision:
a step all-reduces 4 B per parameter in fp32 and 2 B in mixed precision; a
checkpoint keeps weights plus optimiser state (8 B for SGD with momentum,
12 B for fp32 Adam, 16 B for mixed-precision Adam with fp32 master weights).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rackwise.errors import InputError, suggest


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One trainable model at one batch size.

    Attributes:
        name: Catalogue key; for measured types, the table's job type.
        family: Model family ("ResNet-50").
        batch_size: Per-job batch size of the measured type (None if not given).
        params: Parameter count.
        grad_bytes_per_param: Bytes all-reduced per parameter per step.
        state_bytes_per_param: Checkpoint bytes per parameter.
        measured: Speed comes from the measured table.
        distributed: May run on more than one GPU.
        min_gpus: Fewest GPUs a job of this model is given when assigned.
        tokens_per_gpu: Tokens per GPU per step (FLOP-estimated models only).
    """

    name: str
    family: str
    batch_size: int | None
    params: float
    grad_bytes_per_param: float
    state_bytes_per_param: float
    measured: bool = True
    distributed: bool = True
    min_gpus: int = 1
    tokens_per_gpu: int = 0

    @property
    def gradient_bytes(self) -> float:
        """Bytes all-reduced per step (data parallel)."""
        return self.params * self.grad_bytes_per_param

    @property
    def checkpoint_bytes(self) -> float:
        return self.params * self.state_bytes_per_param

    @property
    def flops_per_gpu_step(self) -> float:
        """Training FLOPs per GPU per step (forward + backward ~ 6 per parameter per token)."""
        return 6.0 * self.params * self.tokens_per_gpu


# family -> (params, grad B/param, state B/param, distributed, batch sizes, default batch size)
_MEASURED_FAMILIES: dict[str, tuple[float, float, float, bool, tuple[int, ...] | None, int | None]] = {
    "ResNet-18": (11.2e6, 4.0, 8.0, True, (16, 32, 64, 128, 256), 64),
    "ResNet-50": (25.6e6, 4.0, 8.0, True, (16, 32, 64, 128), 64),
    "Transformer": (52e6, 4.0, 12.0, True, (16, 32, 64, 128, 256), 64),
    "A3C": (0.6e6, 4.0, 12.0, False, None, None),
    "LM": (14e6, 4.0, 4.0, True, (5, 10, 20, 40, 80), 20),
    "Recommendation": (11e6, 4.0, 12.0, False, (512, 1024, 2048, 4096, 8192), 2048),
    "CycleGAN": (28.3e6, 4.0, 12.0, False, None, None),
}


def _measured() -> list[ModelSpec]:
    specs = []
    for family, (params, grad, state, distributed, sizes, _) in _MEASURED_FAMILIES.items():
        for size in sizes or (None,):
            name = family if size is None else f"{family} (batch size {size})"
            specs.append(ModelSpec(name, family, size, params, grad, state, True, distributed))
    return specs


_LARGE = [
    ModelSpec("BERT-Large", "BERT-Large", None, 340e6, 2.0, 16.0, False, True, 2, 4096),
    ModelSpec("GPT-2 XL", "GPT-2 XL", None, 1.542e9, 2.0, 16.0, False, True, 4, 4096),
    ModelSpec("GPT-3 6.7B", "GPT-3 6.7B", None, 6.7e9, 2.0, 16.0, False, True, 16, 4096),
]

CATALOGUE: dict[str, ModelSpec] = {spec.name: spec for spec in [*_measured(), *_LARGE]}
"""Every model by name, measured types first, in a fixed order."""

DEFAULT_BATCH: dict[str, int | None] = {f: v[5] for f, v in _MEASURED_FAMILIES.items()}

_ALIASES = {
    "bert": "BERT-Large", "gpt2": "GPT-2 XL", "gpt3": "GPT-3 6.7B", "gpt367b": "GPT-3 6.7B",
    "recoder": "Recommendation", "rec": "Recommendation", "lstm": "LM",
}


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_SQUASHED = {_squash(name): name for name in CATALOGUE}
_FAMILIES = {_squash(spec.family): spec.family for spec in CATALOGUE.values()}


def resolve_model(name: str, batch_size: int | None = None) -> ModelSpec:
    """A catalogue entry from a name or a friendly alias.

    ``"ResNet-50 (batch size 64)"``, ``"resnet50"`` (the family's default
    batch size) and ``"resnet50", batch_size=128`` all work.

    Raises:
        InputError: an unknown model, or a batch size the family was not measured at.
    """
    if batch_size is None and name in CATALOGUE:
        return CATALOGUE[name]
    key = _squash(name)
    if batch_size is None and key in _BY_SQUASHED:
        return CATALOGUE[_BY_SQUASHED[key]]
    family = _FAMILIES.get(key) or _FAMILIES.get(_squash(_ALIASES.get(key, "")))
    if family is None:
        known = sorted({spec.family for spec in CATALOGUE.values()})
        raise InputError(f"unknown model '{name}'.{suggest(name, known)} Known: {', '.join(known)}",
                         field="model")
    if family not in _MEASURED_FAMILIES:
        if batch_size is not None:
            raise InputError(f"model '{family}' has no batch-size variants", field="batch_size")
        return CATALOGUE[family]
    size = batch_size if batch_size is not None else DEFAULT_BATCH[family]
    full = family if size is None else f"{family} (batch size {size})"
    if full not in CATALOGUE:
        sizes = _MEASURED_FAMILIES[family][4] or ()
        raise InputError(f"'{family}' was measured at batch sizes {list(sizes)}, not {size}",
                         field="batch_size")
    return CATALOGUE[full]


def assign_models(n_gpus: Sequence[int], draws: Sequence[float] | np.ndarray,
                  large_frac_by_size: Sequence[tuple[int, float]]) -> list[str]:
    """Pick a model per job from one uniform draw each, conditioned on its GPU count.

    One-GPU jobs draw uniformly among the measured types. A multi-GPU job of
    n GPUs draws a large model with the probability of the largest threshold
    <= n in ``large_frac_by_size`` (uniformly among those allowed at n GPUs),
    else a measured distributed type, uniformly.
    """
    single = [s.name for s in CATALOGUE.values() if s.measured]
    multi = [s.name for s in CATALOGUE.values() if s.measured and s.distributed]
    large = [s for s in CATALOGUE.values() if not s.measured]
    thresholds = sorted(large_frac_by_size)
    sizes = np.asarray(n_gpus, dtype=np.int64)
    u = np.asarray(draws, dtype=np.float64)
    # Each job's index into its size's list of names; the same float operations
    # per job as a scalar loop, done a size at a time.
    names = np.empty(len(sizes), dtype=object)
    for n in np.unique(sizes).tolist():
        at = sizes == n
        mine = u[at]
        if n <= 1:
            names[at] = _pick(single, mine)
            continue
        frac = 0.0
        for threshold, value in thresholds:
            if n >= threshold:
                frac = value
        allowed = [s.name for s in large if s.min_gpus <= n]
        if not allowed:
            frac = 0.0
        big = mine < frac
        picked = np.empty(len(mine), dtype=object)
        if big.any():
            picked[big] = _pick(allowed, mine[big] / frac)
        picked[~big] = _pick(multi, (mine[~big] - frac) / (1.0 - frac))
        names[at] = picked
    return [str(name) for name in names]


def _pick(names: list[str], u: np.ndarray) -> np.ndarray:
    """``names[int(u x len(names))]`` per draw, the last name for a draw of 1."""
    index = np.minimum((u * len(names)).astype(np.int64), len(names) - 1)
    return np.asarray(names, dtype=object)[index]
