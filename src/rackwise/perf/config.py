"""Every constant of the network performance model, in one documented record.

Link bandwidths themselves belong to the cluster (`rackwise.cluster.topology.Links`);
what lives here is how the model turns links, models and neighbours into
iteration times. Sources for each default are given beside it and in
``docs/perf-model.md``; values marked "assumption" are rackwise's own choices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from rackwise.errors import InputError

# Datasheet figures used to derive the default speed-ups of newer GPUs over V100
# (NVIDIA V100, A100 and H100 SXM datasheets: dense FP16 tensor TFLOP/s, HBM GB/s).
DATASHEET: Mapping[str, tuple[float, float]] = MappingProxyType({
    "v100": (125.0, 900.0),
    "a100": (312.0, 1555.0),
    "h100": (989.0, 3350.0),
})


def datasheet_speedup(gpu_type: str) -> float:
    """Speed-up over V100 as the geometric mean of the FLOP/s and memory-bandwidth ratios.

    Training steps are partly compute-bound and partly memory-bound, so
    neither ratio alone is a fair single figure.
    """
    flops, mem = DATASHEET[gpu_type]
    base_flops, base_mem = DATASHEET["v100"]
    return float(((flops / base_flops) * (mem / base_mem)) ** 0.5)


def _default_speedups() -> dict[str, float]:
    return {gpu: round(datasheet_speedup(gpu), 3) for gpu in ("a100", "h100")}


@dataclass(frozen=True, slots=True)
class PerfConfig:
    """Constants of `NetworkPerf`.

    Attributes:
        latency_node_s: Per-hop latency inside a node (NVLink/PCIe), seconds.
        latency_rack_s: Per-hop latency through the top-of-rack switch (RDMA).
        latency_cluster_s: Per-hop latency through the spine.
            The three latencies follow the [R] table of
            ``shared/papers/network_sensitive_delay.md`` §2.2 (1, 3, 10 µs).
        comm_overlap_frac: Fraction of communication hidden behind compute
            (ω); 0 means every byte is a stall, as the Stash measurements treat it.
        min_compute_frac: Floor on compute time as a fraction of the measured
            iteration time, when the modelled intra-node communication would
            otherwise exceed the measured iteration (assumption).
        interference_scale: How strongly a neighbour on the same node slows a
            job, relative to the measured slowdown of the two jobs sharing the
            same GPUs; in [0, 1], 0 turns interference off (assumption, see docs).
        storage_read_gbytes_per_s: Checkpoint read bandwidth per job, GB/s.
        storage_write_gbytes_per_s: Checkpoint write bandwidth per job, GB/s.
        restart_fixed_s: Fixed cost of a restart: rescheduling, container and
            framework start, data-loader warm-up (30 s, as ``IdealPerf``).
        mfu_frac: Model FLOPs utilisation assumed for catalogue models that
            the measured table does not cover (assumption, typical of V100
            mixed-precision training).
        v100_peak_tflops: V100 dense FP16 tensor peak, TFLOP/s (datasheet).
        gpu_speedup_vs_v100: Speed-up of extra GPU types over V100, applied
            to V100 throughputs for GPU types the table lacks. Defaults from
            `datasheet_speedup` (A100 about 2.08x, H100 about 5.43x).
        pipeline_microbatches: Micro-batches per step for pipeline-parallel
            jobs; the bubble costs (p-1)/m of compute (GPipe's estimate).
        large_model_frac: ``(min GPUs, probability)`` pairs: a job without a
            model and at least that many GPUs is given a large language model
            with that probability (assumption: large models need many GPUs).
    """

    latency_node_s: float = 1e-6
    latency_rack_s: float = 3e-6
    latency_cluster_s: float = 1e-5
    comm_overlap_frac: float = 0.0
    min_compute_frac: float = 0.25
    interference_scale: float = 0.25
    storage_read_gbytes_per_s: float = 2.0
    storage_write_gbytes_per_s: float = 1.0
    restart_fixed_s: float = 30.0
    mfu_frac: float = 0.35
    v100_peak_tflops: float = 125.0
    gpu_speedup_vs_v100: Mapping[str, float] = field(default_factory=_default_speedups)
    pipeline_microbatches: int = 8
    large_model_frac: tuple[tuple[int, float], ...] = ((2, 0.2), (9, 0.5), (16, 0.75))

    @property
    def latency_by_level_s(self) -> tuple[float, float, float]:
        """Per-message latency inside a node, a rack and the cluster (indexed by `Level`)."""
        return (self.latency_node_s, self.latency_rack_s, self.latency_cluster_s)

    @property
    def exposed_comm_frac(self) -> float:
        """The share of communication that compute does not hide."""
        return 1.0 - self.comm_overlap_frac

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "large_model_frac":
                pairs = tuple((int(n), float(p)) for n, p in value)
                if any(not 0.0 <= p < 1.0 for _, p in pairs):
                    raise InputError("probabilities must be in [0, 1)", field=item.name)
                object.__setattr__(self, item.name, pairs)
                continue
            if item.name == "gpu_speedup_vs_v100":
                for gpu, factor in value.items():
                    if not factor > 0:
                        raise InputError(f"speed-up of '{gpu}' must be > 0, got {factor}",
                                         field=item.name)
                # a plain dict (not a proxy) so the config pickles with a simulator
                object.__setattr__(self, item.name,
                                   {str(k).lower(): float(v) for k, v in value.items()})
                continue
            if value < 0 or value != value:
                raise InputError(f"must be >= 0, got {value}", field=item.name)
        if self.interference_scale > 1.0:
            raise InputError(f"must be in [0, 1], got {self.interference_scale}",
                             field="interference_scale")
        if not self.comm_overlap_frac < 1.0 or not 0 < self.min_compute_frac <= 1.0:
            raise InputError("comm_overlap_frac must be < 1 and min_compute_frac in (0, 1]",
                             field="comm_overlap_frac")
        for name in ("storage_read_gbytes_per_s", "storage_write_gbytes_per_s", "mfu_frac",
                     "v100_peak_tflops", "pipeline_microbatches"):
            if not getattr(self, name) > 0:
                raise InputError(f"must be > 0, got {getattr(self, name)}", field=name)
