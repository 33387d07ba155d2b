"""A training job as a graph of GPU workers joined by the bytes they exchange.

One vertex per GPU worker ``(a, b, c)``: data-parallel replica ``a``,
pipeline stage ``b``, tensor-parallel rank ``c``. Edge weights are bytes
per iteration on the heavier direction of a pair, from Megatron-style
traffic estimates (rackwise's reconstruction, docs/policies/asrpt.md):

- tensor-parallel ring inside each (a, b): ``4 (L/p) mu 2(t-1)/t S_act``;
- pipeline edges (a, b, c)-(a, b+1, c): ``mu S_act / t``;
- data-parallel ring over a for each (b, c): ``2(d-1)/d S_grad / (p t)``;

with ``S_act = b s h beta`` the activation bytes of one micro-batch. Vertex
``(a, b, c)`` has index ``(a p + b) t + c``, so each tensor-parallel group
is a run of ``t`` consecutive indices.

These weights are the one definition of a mixed-parallel job's traffic:
the partitioner places the graph, and the network performance model prices
the resulting mapping from it (`graph_placement.placement_cost`,
`direction_share` and `sequential_hops` say how the weights load links).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackwise.errors import InputError
from rackwise.perf.catalogue import resolve_model
from rackwise.workload.job import Job, Parallelism

TP, PP, DP = "tp", "pp", "dp"


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the graph needs to know of a model.

    Attributes:
        name: Model name.
        n_params: Parameter count.
        n_layers: Transformer layers (a rough layer count for other nets).
        hidden: Hidden size.
        seq_len: Tokens per sample.
        micro_batch: Samples per micro-batch.
        n_micro_batches: Micro-batches per iteration.
        activation_bytes: Bytes per activation element (2 for fp16/bf16).
        gradient_bytes_per_param: Bytes all-reduced per parameter.
    """

    name: str
    n_params: float
    n_layers: int
    hidden: int
    seq_len: int
    micro_batch: int = 1
    n_micro_batches: int = 8
    activation_bytes: float = 2.0
    gradient_bytes_per_param: float = 2.0


# (layers, hidden, sequence) of the transformer families the catalogue knows:
# BERT-Large (Devlin et al. 2019), GPT-2 XL (Radford et al. 2019), and the
# 6.7 B model of Brown et al. 2020 (Table 2.1). Other nets, whose traffic is
# mostly gradients, get BERT-Large's shape should they ever be split.
LAYER_SHAPES: dict[str, tuple[int, int, int]] = {
    "bertlarge": (24, 1024, 512),
    "gpt2xl": (48, 1600, 1024),
    "gpt367b": (32, 4096, 2048),
}
DEFAULT_LAYERS = LAYER_SHAPES["bertlarge"]
DEFAULT_N_PARAMS = 25.6e6  # an unknown model is taken to be ResNet-50 sized


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _catalogue_entry(name: str) -> tuple[str, float, float] | None:
    """(family, parameters, gradient bytes per parameter) from the performance catalogue."""
    try:
        spec = resolve_model(name)
    except InputError:
        return None
    return spec.family, spec.params, spec.grad_bytes_per_param


def model_shape(job: Job) -> ModelShape:
    """The shape of ``job``'s model: the one place that decides where sizes come from.

    Family, parameter count and gradient bytes per parameter come from the
    performance catalogue when it knows the model, else the defaults above
    (2 bytes per gradient element); the job's own gradient bytes, when set,
    fix the parameter count.
    """
    entry = _catalogue_entry(job.model) if job.model else None
    family, n_params, grad_bytes = entry or (job.model or "unknown", DEFAULT_N_PARAMS, 2.0)
    if job.gradient_bytes > 0:
        n_params = job.gradient_bytes / grad_bytes
    layers, hidden, seq = LAYER_SHAPES.get(_squash(family), DEFAULT_LAYERS)
    return ModelShape(job.model or family, n_params, layers, hidden, seq,
                      gradient_bytes_per_param=grad_bytes)


def job_parallelism(job: Job) -> Parallelism:
    """The job's (data, tensor, pipeline) degrees; data-parallel over all GPUs if unset or inconsistent."""
    par = job.parallelism
    if par is None or par.n_gpus != job.n_gpus:
        return Parallelism(data=job.n_gpus)
    return par


@dataclass(frozen=True, slots=True)
class JobGraph:
    """Workers and the bytes per iteration they exchange.

    Attributes:
        parallelism: The (d, t, p) degrees; ``n_vertices == d t p``.
        edges: ``(u, v, bytes, kind)`` with ``u < v`` and kind one of tp/pp/dp.
    """

    parallelism: Parallelism
    edges: tuple[tuple[int, int, float, str], ...]

    @property
    def n_vertices(self) -> int:
        return self.parallelism.n_gpus

    def vertex(self, a: int, b: int, c: int) -> int:
        """Index of replica ``a``, stage ``b``, tensor rank ``c``."""
        par = self.parallelism
        return (a * par.pipeline + b) * par.tensor + c

    def coords(self, v: int) -> tuple[int, int, int]:
        """``(a, b, c)`` of vertex ``v``."""
        par = self.parallelism
        ab, c = divmod(v, par.tensor)
        a, b = divmod(ab, par.pipeline)
        return a, b, c

    def adjacency(self) -> list[dict[int, float]]:
        """Neighbour -> summed bytes, per vertex."""
        adj: list[dict[int, float]] = [{} for _ in range(self.n_vertices)]
        for u, v, w, _ in self.edges:
            adj[u][v] = adj[u].get(v, 0.0) + w
            adj[v][u] = adj[v].get(u, 0.0) + w
        return adj

    @property
    def total_bytes(self) -> float:
        return sum(w for _, _, w, _ in self.edges)


def ring_size(par: Parallelism, kind: str) -> int:
    """Members of each ring of ``kind`` (tp: t, dp: d); 2 for the pipeline's point-to-point pairs."""
    if kind == TP:
        return par.tensor
    if kind == DP:
        return par.data
    return 2


def direction_share(par: Parallelism, kind: str) -> float:
    """Share of an edge's weight that leaves each end, per direction of a full-duplex link.

    A pipeline edge and the single edge of a two-member ring carry their
    bytes both ways (1.0). A ring of three or more members sends one way
    round, so a set of workers that a ring crosses into and out of sends
    and receives half the summed weight of its cut ring edges (0.5): the
    ring leaves the set as often as it enters it.
    """
    return 0.5 if ring_size(par, kind) > 2 else 1.0


def sequential_hops(par: Parallelism, kind: str) -> int:
    """Messages one after another per iteration: ``2(n-1)`` for a ring of n
    (reduce-scatter then all-gather), ``2(p-1)`` for the pipeline (activations
    forward through p-1 stage boundaries, their gradients back)."""
    if kind == PP:
        return 2 * (par.pipeline - 1)
    return 2 * (ring_size(par, kind) - 1)


def _ring(members: list[int]) -> list[tuple[int, int]]:
    """Neighbour pairs of a ring; two members share one edge, one member none."""
    n = len(members)
    if n < 2:
        return []
    pairs = [(members[i], members[i + 1]) for i in range(n - 1)]
    if n > 2:
        pairs.append((members[-1], members[0]))
    return [(min(u, v), max(u, v)) for u, v in pairs]


def mixed_parallel_graph(par: Parallelism, *, tp_bytes: float, pp_bytes: float,
                         dp_bytes: float) -> JobGraph:
    """The worker graph of a (d, t, p) job with the given bytes per edge of each kind."""
    d, t, p = par.data, par.tensor, par.pipeline
    graph = JobGraph(par, ())
    edges: list[tuple[int, int, float, str]] = []
    for a in range(d):
        for b in range(p):
            for u, v in _ring([graph.vertex(a, b, c) for c in range(t)]):
                edges.append((u, v, tp_bytes, TP))
    for a in range(d):
        for b in range(p - 1):
            for c in range(t):
                edges.append((graph.vertex(a, b, c), graph.vertex(a, b + 1, c), pp_bytes, PP))
    for b in range(p):
        for c in range(t):
            for u, v in _ring([graph.vertex(a, b, c) for a in range(d)]):
                edges.append((u, v, dp_bytes, DP))
    return JobGraph(par, tuple(edges))


def edge_bytes(shape: ModelShape, par: Parallelism,
               gradient_bytes: float | None = None) -> tuple[float, float, float]:
    """Bytes per iteration on one (tp, pp, dp) edge.

    Args:
        shape: The model.
        par: The job's degrees.
        gradient_bytes: Gradient bytes of the whole model per all-reduce;
            default ``n_params * gradient_bytes_per_param``.
    """
    d, t, p = par.data, par.tensor, par.pipeline
    act = shape.micro_batch * shape.seq_len * shape.hidden * shape.activation_bytes
    mu = shape.n_micro_batches
    tp = 4.0 * (shape.n_layers / p) * mu * 2.0 * (t - 1) / t * act
    pp = mu * act / t
    grads = shape.n_params * shape.gradient_bytes_per_param if gradient_bytes is None else gradient_bytes
    dp = 2.0 * (d - 1) / d * grads / (p * t)
    return tp, pp, dp


#: The fields `build_job_graph` reads from a job (`graph_kind`).
GraphKind = tuple[str | None, float, int, Parallelism | None]


def graph_kind(job: Job) -> GraphKind:
    """The fields `build_job_graph` reads from a job: jobs alike in them have one graph."""
    return (job.model, job.gradient_bytes, job.n_gpus, job.parallelism)


def build_job_graph(job: Job, parallelism: Parallelism | None = None) -> JobGraph:
    """``job``'s worker graph from its model, gradient size and parallelism.

    Args:
        job: The job.
        parallelism: Degrees to use instead of `job_parallelism` (the
            performance model passes the ones it checked against the GPUs).
    """
    par = parallelism if parallelism is not None else job_parallelism(job)
    shape = model_shape(job)
    tp, pp, dp = edge_bytes(shape, par, job.gradient_bytes if job.gradient_bytes > 0 else None)
    return mixed_parallel_graph(par, tp_bytes=tp, pp_bytes=pp, dp_bytes=dp)
