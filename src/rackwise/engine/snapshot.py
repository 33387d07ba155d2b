"""The snapshot record: everything a forecast needs about one instant of a cluster.

The simulator and every backend produce this same record, so one forward
simulation serves them all. A snapshot holds copies: the engine that took
it may go on changing its own job states without changing the snapshot.

JSON form: one object with ``"format": "rackwise-snapshot/1"``. The policy's
internal state travels as a base64 pickle; read snapshot files only from
sources you trust, or ignore that state (``fresh_policy=True`` in the
forecast), as one would any pickle.
"""

from __future__ import annotations

import base64
import json
import math
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from rackwise.cluster.allocation import SLICED, SLICES_PER_GPU, slices_of
from rackwise.cluster.topology import Links, Node, Topology
from rackwise.errors import InputError
from rackwise.workload.job import Job, Parallelism
from rackwise.workload.state import JOB_FIELDS, STATE_FIELDS, JobState, Status

FORMAT = "rackwise-snapshot/1"
# Share of the duration error jobs have in common, where it was not measured
# (files from before it was, backends): see `forecast.durations.error_correlation`.
DEFAULT_ERROR_CORRELATION = 0.5
HELD_PREFIX = "!"  # owners of GPUs no policy may use (a node down, a job not ours)
_SAVED_SLOTS = tuple(slot for slot in STATE_FIELDS if slot not in JOB_FIELDS)


@dataclass(frozen=True)
class ClusterSnapshot:
    """One instant of a cluster, its jobs and its scheduler.

    Attributes:
        taken_at_s: The workload clock when the snapshot was taken, seconds.
        topology: The cluster.
        running: Jobs holding GPUs, in the order they started (copies).
        pending: Jobs waiting, in queue order (copies).
        predicted_duration_s: Predicted total run time of each running and
            pending job, at trace speed (seconds of a ``duration_s``).
        held_gpus: GPUs no policy may use, by pseudo-owner (``"!down:node3"``).
        arrivals: Jobs known to arrive later (a replayed trace), submit order.
        duration_error: Observed actual/predicted duration ratios by job
            group (key ``""``: all groups), for uncertainty bands.
        error_correlation: Share of that error the jobs of one band sample
            have in common (fitted on the finished jobs; 0.5 if not).
        policy_name: Registered name of the policy in force.
        policy_params: Its parameters.
        policy_state: The live policy, pickled, or None (start a fresh one).
        decided: The policy has already decided at ``taken_at_s``.
        timers: Wake-up times the policy asked for that are still to come.
        next_round_s: When the next scheduling round is due (round-based policies).
        perf_name: Performance model name (see `rackwise.run.PERF_MODELS`).
        perf_params: Its parameters.
        node_names: The cluster manager's name of each node.
        source: Who took it ("simulation", "slurm", "file", ...).
        arrival_rate_per_s: Recent submissions per second (0: unknown).
        arrival_shapes: Recent jobs' (n_gpus, duration_s), to resample
            further arrivals from (`rackwise.workload.synthetic.WorkloadModel`).
        taken_wall_s: Unix time it was taken, for a real cluster (staleness).
        node_order: Node ids in the order the simulator's allocation holds
            them (placement ties break by it; empty: any order).
        completion_order: Running job ids in the order the simulator's
            completion events were queued (same-instant ties break by it).
    """

    taken_at_s: float
    topology: Topology
    running: tuple[JobState, ...]
    pending: tuple[JobState, ...]
    predicted_duration_s: Mapping[str, float]
    held_gpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    arrivals: tuple[Job, ...] = ()
    duration_error: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    error_correlation: float = DEFAULT_ERROR_CORRELATION
    policy_name: str = "fifo"
    policy_params: Mapping[str, Any] = field(default_factory=dict)
    policy_state: bytes | None = None
    decided: bool = False
    timers: tuple[float, ...] = ()
    next_round_s: float | None = None
    perf_name: str = "ideal"
    perf_params: Mapping[str, Any] = field(default_factory=dict)
    node_names: tuple[str, ...] = ()
    source: str = "simulation"
    arrival_rate_per_s: float = 0.0
    arrival_shapes: tuple[tuple[int, float], ...] = ()
    taken_wall_s: float | None = None
    node_order: tuple[int, ...] = ()
    completion_order: tuple[str, ...] = ()

    def names_of_nodes(self) -> tuple[str, ...]:
        """Node names, ``n0``, ``n1``, ... when the source gave none."""
        return self.node_names or tuple(f"n{node.node_id}" for node in self.topology.nodes)

    def with_predictions(self, predicted_duration_s: Mapping[str, float],
                         duration_error: Mapping[str, tuple[float, ...]],
                         error_correlation: float | None = None) -> ClusterSnapshot:
        """A copy with other duration predictions and error ratios (and correlation, if given)."""
        return replace(self, predicted_duration_s=dict(predicted_duration_s),
                       duration_error=dict(duration_error),
                       error_correlation=(self.error_correlation if error_correlation is None
                                          else error_correlation))


# ----------------------------------------------------------------------------- copies


def copy_state(state: JobState) -> JobState:
    """A field-by-field copy of a job state (the job record itself is immutable)."""
    return state.copy()


def pickle_policy(policy: object) -> bytes:
    """The live policy as bytes; a policy that cannot be pickled is an `InputError`."""
    try:
        return pickle.dumps(policy, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        name = getattr(policy, "name", type(policy).__name__)
        raise InputError(f"policy '{name}' cannot be pickled mid-run: {exc}",
                         field="policy") from None


def from_view(view: Any, now: float, *, source: str, policy_name: str = "fifo",
              policy_params: Mapping[str, Any] | None = None,
              predicted_duration_s: Mapping[str, float] | None = None,
              arrivals: Iterable[Job] = (), node_names: Sequence[str] = (),
              perf_name: str = "ideal", perf_params: Mapping[str, Any] | None = None,
              taken_wall_s: float | None = None) -> ClusterSnapshot:
    """A snapshot of what a `ClusterView` shows, with no policy state.

    Backends call this on the view they observed. GPUs owned by names that
    start with ``"!"`` become ``held_gpus``. Without ``predicted_duration_s``
    each job's own ``duration_s`` is its prediction.
    """
    running = tuple(copy_state(s) for s in view.running.values())
    pending = tuple(copy_state(s) for s in view.pending.values())
    held: dict[str, list[int]] = {}
    owned = {s.job_id for s in running}
    for gpu in range(view.topology.n_gpus):
        owner = view.owner_of(gpu)
        if owner is not None and owner not in owned and owner != SLICED:
            held.setdefault(owner if owner.startswith(HELD_PREFIX) else HELD_PREFIX + owner,
                            []).append(gpu)
    predicted = dict(predicted_duration_s or {})
    for state in (*running, *pending):
        predicted.setdefault(state.job_id, state.job.duration_s)
    snapshot = ClusterSnapshot(
        taken_at_s=float(now), topology=view.topology, running=running, pending=pending,
        predicted_duration_s=predicted, held_gpus={k: tuple(v) for k, v in held.items()},
        arrivals=tuple(sorted(arrivals, key=lambda j: (j.submit_time, j.job_id))),
        policy_name=policy_name, policy_params=dict(policy_params or {}),
        perf_name=perf_name, perf_params=dict(perf_params or {}),
        node_names=tuple(node_names), source=source, taken_wall_s=taken_wall_s)
    validate(snapshot)
    return snapshot


# -------------------------------------------------------------------------- validation


def validate(snapshot: ClusterSnapshot, *, now_s: float | None = None,
             max_age_s: float | None = None) -> None:
    """Raise `InputError` naming the first inconsistency found.

    Checks: each job appears once; a running job's GPUs exist, are distinct,
    number its request and are not held by anything else; no node has more
    GPUs in use than it owns; pending jobs fit the cluster; predictions are
    positive; the error correlation is in [0, 1]; and, given ``now_s`` and ``max_age_s``, the snapshot is not stale.
    """
    topology = snapshot.topology
    n_gpus = topology.n_gpus
    if not math.isfinite(snapshot.taken_at_s):
        raise InputError(f"taken_at_s is {snapshot.taken_at_s}", field="taken_at_s")
    if now_s is not None and max_age_s is not None:
        if snapshot.taken_wall_s is None:
            raise InputError("cannot tell the snapshot's age: it has no wall time (a simulation "
                             "snapshot); leave out the age limit", field="taken_wall_s")
        age_s = now_s - snapshot.taken_wall_s
        if age_s > max_age_s:
            raise InputError(f"snapshot is stale: taken {age_s:.0f} s ago, limit {max_age_s:.0f} s",
                             field="taken_wall_s")
    if not 0.0 <= snapshot.error_correlation <= 1.0:  # also NaN
        raise InputError(f"error_correlation is {snapshot.error_correlation}; it must be in "
                         f"[0, 1]", field="error_correlation")
    if snapshot.node_order and sorted(snapshot.node_order) != list(range(topology.n_nodes)):
        raise InputError("node_order must list every node once", field="node_order")
    if snapshot.node_names and len(snapshot.node_names) != topology.n_nodes:
        raise InputError(f"{len(snapshot.node_names)} node names for {topology.n_nodes} nodes",
                         field="node_names")
    seen: set[str] = set()
    owner: dict[int, str] = {}
    claimed: dict[str, JobState] = {}  # running jobs whose GPUs are claimed
    split: dict[int, int] = {}  # GPU -> slices its fractional jobs take
    running_ids = {state.job_id for state in snapshot.running}
    per_node = [0] * topology.n_nodes
    for kind, states in (("running", snapshot.running), ("pending", snapshot.pending)):
        for state in states:
            job = state.job
            if job.job_id in seen:
                raise InputError(f"job {job.job_id} appears twice", field=kind)
            seen.add(job.job_id)
            if not 0 < job.n_gpus <= n_gpus:
                raise InputError(f"job {job.job_id} asks for {job.n_gpus} GPUs; the cluster "
                                 f"has {n_gpus}", field=f"{kind}.n_gpus")
            predicted = snapshot.predicted_duration_s.get(job.job_id)
            if predicted is None or not (predicted > 0 and math.isfinite(predicted)):
                raise InputError(f"job {job.job_id} has predicted duration {predicted}; it must "
                                 f"be a positive number", field="predicted_duration_s")
            if kind == "pending":
                continue  # a preempted job remembers where it ran; that holds nothing
            gpus = state.gpu_ids
            if len(gpus) != job.n_gpus * state.copies or len(set(gpus)) != len(gpus):
                raise InputError(f"running job {job.job_id} asks for {job.n_gpus} GPUs but holds "
                                 f"{list(gpus)}", field="running.gpu_ids")
            if state.partner is not None:
                if state.partner not in running_ids:
                    raise InputError(f"running job {job.job_id} shares GPUs with {state.partner}, "
                                     f"which is not running", field="running.partner")
                partner = claimed.get(state.partner)
                if partner is not None:  # space sharing: a pair holds its GPUs once
                    if partner.partner != job.job_id or sorted(partner.gpu_ids) != sorted(gpus):
                        raise InputError(f"running job {job.job_id} shares GPUs with "
                                         f"{partner.job_id}, but they do not hold the same GPUs "
                                         f"as each other's partners", field="running.partner")
                    continue
            if job.is_fractional:  # its GPU is split: claimed once, by SLICED
                used = split[gpus[0]] = split.get(gpus[0], 0) + slices_of(job.gpu_share)
                if used > SLICES_PER_GPU:
                    raise InputError(f"running job {job.job_id} takes {job.gpu_share:g} of GPU "
                                     f"{gpus[0]}, whose shares then add up above 1",
                                     field="running.gpu_ids")
                if owner.get(gpus[0]) != SLICED:
                    _claim(owner, per_node, topology, gpus[0], SLICED)
                continue
            claimed[job.job_id] = state
            for gpu in gpus:
                _claim(owner, per_node, topology, gpu, job.job_id)
    for name, gpus in snapshot.held_gpus.items():
        if not name.startswith(HELD_PREFIX):
            raise InputError(f"held GPUs must belong to a name starting with "
                             f"'{HELD_PREFIX}', got '{name}'", field="held_gpus")
        for gpu in gpus:
            _claim(owner, per_node, topology, gpu, name)
    for job in snapshot.arrivals:
        if job.job_id in seen:
            raise InputError(f"job {job.job_id} appears twice", field="arrivals")
        seen.add(job.job_id)
        if job.submit_time < snapshot.taken_at_s:
            raise InputError(f"arriving job {job.job_id} was submitted at {job.submit_time} s, "
                             f"before the snapshot", field="arrivals.submit_time")
        if not 0 < job.n_gpus <= n_gpus:
            raise InputError(f"job {job.job_id} asks for {job.n_gpus} GPUs; the cluster "
                             f"has {n_gpus}", field="arrivals.n_gpus")


def _claim(owner: dict[int, str], per_node: list[int], topology: Topology, gpu: int,
           who: str) -> None:
    if not 0 <= gpu < topology.n_gpus:
        raise InputError(f"{who} is on GPU {gpu}, which does not exist (the cluster has "
                         f"{topology.n_gpus} GPUs)", field="gpu_ids")
    if gpu in owner:
        raise InputError(f"GPU {gpu} is held by both {owner[gpu]} and {who}", field="gpu_ids")
    owner[gpu] = who
    node = topology.nodes[topology.gpu_node[gpu]]
    per_node[node.node_id] += 1
    if per_node[node.node_id] > node.n_gpus:  # unreachable with valid ids; kept as a guard
        raise InputError(f"node {node.node_id} has {node.n_gpus} GPUs but more are in use",
                         field="gpu_ids")


# ------------------------------------------------------------------------------- JSON


def _job_dict(job: Job) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(job):
        value = getattr(job, f.name)
        if f.name == "parallelism" and value is not None:
            value = [value.data, value.tensor, value.pipeline]
        elif f.name == "tags":
            value = [list(pair) for pair in value]
        out[f.name] = value
    return out


def _job_from(data: Mapping[str, Any], where: str) -> Job:
    try:
        values = dict(data)
        if values.get("parallelism") is not None:
            values["parallelism"] = Parallelism(*values["parallelism"])
        values["tags"] = tuple(tuple(pair) for pair in values.get("tags", ()))
        return Job(**values)
    except (TypeError, ValueError) as exc:
        raise InputError(f"cannot read a job: {exc}", field=where) from None


def _state_dict(state: JobState) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for slot in _SAVED_SLOTS:
        value = getattr(state, slot)
        if slot == "job":
            value = _job_dict(value)
        elif slot == "status":
            value = value.value
        elif slot == "gpu_ids":
            value = list(value)
        out[slot] = value
    return out


def _state_from(data: Mapping[str, Any], where: str) -> JobState:
    if not isinstance(data, Mapping) or "job" not in data:
        raise InputError("expected an object with a 'job'", field=where)
    state = JobState(_job_from(data["job"], f"{where}.job"))
    for slot in _SAVED_SLOTS:
        if slot == "job" or slot not in data:
            continue
        value = data[slot]
        try:
            if slot == "status":
                value = Status(value)
            elif slot == "gpu_ids":
                value = tuple(int(g) for g in value)
        except (TypeError, ValueError) as exc:
            raise InputError(f"bad value {value!r}: {exc}", field=f"{where}.{slot}") from None
        setattr(state, slot, value)
    return state


def to_json(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """The snapshot as JSON-ready data."""
    topo = snapshot.topology
    return {
        "format": FORMAT,
        "taken_at_s": snapshot.taken_at_s,
        "source": snapshot.source,
        "taken_wall_s": snapshot.taken_wall_s,
        "node_order": list(snapshot.node_order),
        "completion_order": list(snapshot.completion_order),
        "topology": {
            "name": topo.name,
            "links": {f.name: getattr(topo.links, f.name) for f in fields(topo.links)},
            "nodes": [[n.rack_id, n.gpu_type, n.n_gpus] for n in topo.nodes],
            "gpu_speedup_vs_v100": dict(topo.gpu_speedups),
        },
        "node_names": list(snapshot.node_names),
        "running": [_state_dict(s) for s in snapshot.running],
        "pending": [_state_dict(s) for s in snapshot.pending],
        "predicted_duration_s": dict(snapshot.predicted_duration_s),
        "held_gpus": {k: list(v) for k, v in snapshot.held_gpus.items()},
        "arrivals": [_job_dict(j) for j in snapshot.arrivals],
        "duration_error": {k: list(v) for k, v in snapshot.duration_error.items()},
        "error_correlation": snapshot.error_correlation,
        "policy": {
            "name": snapshot.policy_name,
            "params": dict(snapshot.policy_params),
            "state": (base64.b64encode(snapshot.policy_state).decode("ascii")
                      if snapshot.policy_state is not None else None),
            "decided": snapshot.decided,
            "timers": list(snapshot.timers),
            "next_round_s": snapshot.next_round_s,
        },
        "perf": {"name": snapshot.perf_name, "params": dict(snapshot.perf_params)},
        "arrival_model": {"rate_per_s": snapshot.arrival_rate_per_s,
                          "shapes": [list(shape) for shape in snapshot.arrival_shapes]},
    }


def from_json(data: Any, source: str = "snapshot") -> ClusterSnapshot:
    """Read and validate a snapshot from JSON data.

    Raises:
        InputError: naming ``source`` and the field that is missing or wrong.
    """
    try:
        return _from_json(data)
    except InputError as exc:
        raise InputError(str(exc), source=source) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"not a rackwise snapshot ({type(exc).__name__}: {exc})",
                         source=source) from None


def _from_json(data: Any) -> ClusterSnapshot:
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise InputError(f"expected 'format': '{FORMAT}'", field="format")
    topo = data["topology"]
    nodes: list[Node] = []
    first = 0
    for index, (rack_id, gpu_type, n_gpus) in enumerate(topo["nodes"]):
        nodes.append(Node(index, int(rack_id), str(gpu_type), int(n_gpus), first))
        first += int(n_gpus)
    if not nodes:
        raise InputError("the cluster has no nodes", field="topology.nodes")
    try:
        speedups = tuple(sorted((str(k), float(v))
                                for k, v in topo.get("gpu_speedup_vs_v100", {}).items()))
        topology = Topology(tuple(nodes), Links(**topo.get("links", {})), str(topo.get("name", "")),
                            speedups)
    except ValueError as exc:
        raise InputError(str(exc), field="topology.nodes") from None
    policy = data.get("policy", {})
    state = policy.get("state")
    perf = data.get("perf", {})
    snapshot = ClusterSnapshot(
        taken_at_s=float(data["taken_at_s"]), topology=topology,
        running=tuple(_state_from(s, f"running[{i}]") for i, s in enumerate(data["running"])),
        pending=tuple(_state_from(s, f"pending[{i}]") for i, s in enumerate(data["pending"])),
        predicted_duration_s={str(k): float(v) for k, v in data["predicted_duration_s"].items()},
        held_gpus={str(k): tuple(int(g) for g in v)
                   for k, v in data.get("held_gpus", {}).items()},
        arrivals=tuple(_job_from(j, f"arrivals[{i}]") for i, j in enumerate(data.get("arrivals", []))),
        duration_error={str(k): tuple(float(r) for r in v)
                        for k, v in data.get("duration_error", {}).items()},
        error_correlation=float(data.get("error_correlation", DEFAULT_ERROR_CORRELATION)),
        policy_name=str(policy.get("name", "fifo")), policy_params=dict(policy.get("params", {})),
        policy_state=base64.b64decode(state) if state else None,
        decided=bool(policy.get("decided", False)),
        timers=tuple(float(t) for t in policy.get("timers", [])),
        next_round_s=(float(policy["next_round_s"]) if policy.get("next_round_s") is not None
                      else None),
        perf_name=str(perf.get("name", "ideal")), perf_params=dict(perf.get("params", {})),
        node_names=tuple(str(n) for n in data.get("node_names", [])),
        source=str(data.get("source", "file")),
        node_order=tuple(int(n) for n in data.get("node_order", [])),
        completion_order=tuple(str(j) for j in data.get("completion_order", [])),
        taken_wall_s=(float(data["taken_wall_s"]) if data.get("taken_wall_s") is not None
                      else None),
        arrival_rate_per_s=float(data.get("arrival_model", {}).get("rate_per_s", 0.0)),
        arrival_shapes=tuple((int(n), float(d))
                             for n, d in data.get("arrival_model", {}).get("shapes", [])))
    validate(snapshot)
    return snapshot


def save(snapshot: ClusterSnapshot, path: str | Path) -> Path:
    """Write the snapshot as JSON (nothing is written if encoding fails)."""
    path = Path(path)
    text = json.dumps(to_json(snapshot), allow_nan=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(path: str | Path) -> ClusterSnapshot:
    """Read a snapshot file; every problem is an `InputError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such snapshot file", source=str(path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read JSON: {exc}", source=str(path)) from None
    return from_json(data, source=str(path))
