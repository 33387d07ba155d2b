"""The Kubernetes backend: rackwise as a secondary scheduler for GPU pods.

Pods whose ``spec.schedulerName`` is rackwise's (``rackwise`` by default)
are left alone by the default scheduler. Each round rackwise lists nodes
and pods, groups its pods into gangs (`kubernetes_objects.group`), shows
the policy the same `ClusterView` the simulator does, and binds the pods
of each started job with the Binding API, all of a gang or none of it.

Placement is per node and by count: the policy's GPU ids say how many
GPUs a job gets on which node, and the kubelet's device plugin picks which
devices. A running job is shown on the ids the policy chose while they stay
consistent with where its pods are, else on the lowest free ids of those
nodes. A gang's pods are packed onto the chosen nodes, largest first; when
their sizes cannot match the chosen counts the start is refused and no
pod is bound.

Preemption deletes the job's pods. Its controller (a Job, JobSet,
PyTorchJob...) recreates them, and once all are back the job is pending
again; rackwise keeps the job's submit time, run time and preemption count
in memory (lost when ``rackwise serve`` restarts). Until the deleted pods
have terminated, the preempted job keeps its GPUs in the view, and a start
that needs those GPUs is refused for that round and tried again.

A rollback after a failed binding deletes the pods already bound, so a
gang is never left half placed: it waits until its controller has
recreated them. A gang found half bound (a serve that stopped between
bindings, a replaced pod of a running gang) is rolled back the same way.
Bare pods (no controller) do not come back.

The workload clock: ``now = (wall - t0) * time_scale``; ``t0`` is when the
backend was made unless given.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rackwise.backends.base import INF, FailedJob, Outcome, Snapshot
from rackwise.backends.kubernetes_api import KubeApi, KubeApiError
from rackwise.backends.kubernetes_objects import (
    DURATION_KEY,
    GPU_RESOURCE,
    Gang,
    discover,
    group,
    node_gpus,
    node_name,
    node_unusable,
    pack,
    parse_time,
    phase,
    pod_gpus,
    pod_key,
    terminating,
)
from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import Links, Topology
from rackwise.engine.view import ClusterView
from rackwise.metrics.records import JobRecord
from rackwise.perf.base import IdealPerf, PerfModel
from rackwise.policies.base import Decisions, Start
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, Status

log = logging.getLogger("rackwise.serve.kubernetes")

Pod = Mapping[str, Any]


@dataclass
class _Tracked:
    """One rackwise job as seen this round.

    ``kind`` is waiting (not all pods exist yet), pending, running, draining
    (preempted, pods still terminating), finished or failed.
    """

    gang: Gang | None
    job: Job
    kind: str
    pods: list[Pod]
    state: JobState | None = None


class KubernetesBackend:
    """Runs rackwise decisions on a Kubernetes cluster by binding pods.

    Args:
        api: How to reach the API server (default: kubeconfig or in-cluster).
        scheduler_name: Pods with this ``spec.schedulerName`` are rackwise's.
        namespace: Only manage pods in this namespace (default: all). GPUs
            held by pods of every namespace are always counted.
        node_selector: A label selector; only matching nodes are scheduled.
        rack_label: Node label whose value names the node's rack.
        gpu_type_label: Node label naming the GPU product (``gpu_type`` below
            when it names no GPU type rackwise knows).
        default_gpu_type: GPU type of nodes whose label says nothing known.
        gpu_resource: The extended resource that counts GPUs.
        default_duration_s: Duration of a job without a
            ``rackwise.io/duration-s`` annotation (only estimates use it).
        recreate_timeout_s: Real seconds a preempted job's pods may take to
            come back before the job is reported failed.
        poll_s: Real seconds between reads of the cluster.
        time_scale: Workload seconds per real second.
        t0: Unix time of workload second 0 (default: now).
        links: Link bandwidths of the topology.
        perf: Rate model for the view's progress estimates (default: trace speeds).
        clock, sleep: Wall clock and sleep (tests replace them).
    """

    name: ClassVar[str] = "kubernetes"

    def __init__(self, *, api: KubeApi | None = None, scheduler_name: str = "rackwise",
                 namespace: str | None = None, node_selector: str | None = None,
                 rack_label: str = "topology.kubernetes.io/zone",
                 gpu_type_label: str = "nvidia.com/gpu.product", default_gpu_type: str = "v100",
                 gpu_resource: str = GPU_RESOURCE, default_duration_s: float = 3600.0,
                 recreate_timeout_s: float = 300.0, poll_s: float = 1.0, time_scale: float = 1.0,
                 t0: float | None = None, links: Links | None = None,
                 perf: PerfModel | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.api = api if api is not None else KubeApi()
        self.scheduler_name = scheduler_name
        self.namespace = namespace
        self.node_selector = node_selector
        self.gpu_resource = gpu_resource
        self.default_duration_s = default_duration_s
        self.recreate_timeout_s = recreate_timeout_s
        self.poll_s = poll_s
        self.time_scale = time_scale
        self._clock = clock
        self._sleep = sleep
        self.t0 = clock() if t0 is None else t0
        self.topology: Topology
        self.topology, self.node_names = discover(
            self.api.nodes(node_selector), rack_label=rack_label, gpu_type_label=gpu_type_label,
            default_gpu_type=default_gpu_type, resource=gpu_resource, links=links)
        self._node_id = {name: index for index, name in enumerate(self.node_names)}
        self.perf: PerfModel = perf if perf is not None else IdealPerf(checkpoint_restore_s=0.0)
        # What Kubernetes does not keep for us; all of it is lost on a restart.
        self._submit: dict[str, float] = {}
        self._queued: dict[str, float] = {}
        self._first_start: dict[str, float] = {}
        self._run_start: dict[str, float] = {}
        self._run_s: dict[str, float] = {}
        self._n_preemptions: dict[str, int] = {}
        self._preempted: dict[str, tuple[float, Job]] = {}  # job -> wall time of its preemption
        self._intended: dict[str, tuple[int, ...]] = {}
        self._records: dict[str, JobRecord] = {}
        self._failed: dict[str, FailedJob] = {}
        self._current: dict[str, _Tracked] = {}

    def close(self) -> None:
        """Release the API client."""
        self.api.close()

    # ---------------------------------------------------------------- clock
    def wall_to_now(self, wall: float) -> float:
        return (wall - self.t0) * self.time_scale

    def now_to_wall(self, now: float) -> float:
        return self.t0 + now / self.time_scale

    # -------------------------------------------------------------- observe
    def observe(self) -> Snapshot:
        raw_nodes = self.api.nodes(self.node_selector)
        ours = self.api.pods(namespace=self.namespace,
                             field_selector=f"spec.schedulerName={self.scheduler_name}")
        bound = self.api.pods(
            field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
        wall = self._clock()
        now = self.wall_to_now(wall)
        tracked = self._classify(group(ours), wall, now)
        self._current = tracked
        return self._build(tracked, raw_nodes, bound, wall, now)

    def _classify(self, gangs: dict[str, Gang], wall: float, now: float) -> dict[str, _Tracked]:
        tracked: dict[str, _Tracked] = {}
        for job_id, gang in gangs.items():
            if job_id in self._records or job_id in self._failed:
                continue
            kind, pods = self._kind(gang, wall)
            job = self._job(gang, pods or gang.pods, now)
            if kind in ("pending", "running") and job.n_gpus == 0:
                self._fail(job, f"its pods ask for no {self.gpu_resource}; rackwise places "
                                   f"GPU pods only")
                continue
            if kind == "failed":
                self._fail(job, self._failure(gang))
                continue
            if kind == "split":
                self._undo_split(job, pods, len(gang.active), now)
                tracked[job_id] = _Tracked(None, job, "waiting", [])
                continue
            if kind in ("pending", "running"):
                self._preempted.pop(job_id, None)
            tracked[job_id] = _Tracked(gang, job, kind, pods)
        for job_id, (preempted_wall, job) in list(self._preempted.items()):
            if job_id in tracked or job_id in self._failed:
                continue
            previous = self._current.get(job_id)
            if wall - preempted_wall > self.recreate_timeout_s or previous is None:
                self._preempted.pop(job_id)
                self._fail(job, f"its pods were not recreated within "
                                f"{self.recreate_timeout_s:g} s of its preemption")
            else:
                tracked[job_id] = _Tracked(None, previous.job, "waiting", [])
        for job_id, previous in self._current.items():
            if previous.kind == "running" and job_id not in tracked and job_id not in self._records \
                    and job_id not in self._failed:
                self._fail(previous.job, "its pods were deleted while it ran")
        return tracked

    def _kind(self, gang: Gang, wall: float) -> tuple[str, list[Pod]]:
        """What the job is doing, and the pods that say so."""
        active = gang.active
        dying = [p for p in gang.pods if terminating(p) and phase(p) in ("Pending", "Running")
                 and node_name(p)]
        placed = [p for p in active if node_name(p)]
        if gang.job_id in self._preempted and dying:
            return "draining", dying
        if placed:
            return ("split" if len(placed) < len(active) else "running"), placed
        if active:
            return ("pending" if len(active) >= gang.size else "waiting"), active
        if dying or gang.job_id in self._preempted:
            return "waiting", []
        phases = {phase(p) for p in gang.pods}
        if "Failed" in phases:
            return "failed", gang.pods
        if "Succeeded" in phases:
            return "finished", [p for p in gang.pods if phase(p) == "Succeeded"]
        return "waiting", []

    def _failure(self, gang: Gang) -> str:
        for pod in gang.pods:
            if phase(pod) == "Failed":
                status = pod.get("status") or {}
                why = status.get("reason") or status.get("message") or "no reason given"
                return f"pod {'/'.join(pod_key(pod))} failed ({why})"
        return "a pod failed"

    def _fail(self, job: Job, reason: str) -> None:
        job_id = job.job_id
        if job_id not in self._failed:
            log.warning("job %s failed: %s", job_id, reason)
            self._failed[job_id] = FailedJob(job, reason)

    def _job(self, gang: Gang, pods: list[Pod], now: float) -> Job:
        if gang.job_id not in self._submit:
            created = [t for p in gang.pods
                       if (t := parse_time((p.get("metadata") or {}).get("creationTimestamp")))
                       is not None]
            self._submit[gang.job_id] = self.wall_to_now(min(created)) if created else now
        duration = gang.annotation(DURATION_KEY)
        try:
            duration_s = float(duration) if duration is not None else self.default_duration_s
        except ValueError:
            duration_s = self.default_duration_s
        n_gpus = sum(pod_gpus(p, self.gpu_resource) for p in pods)
        return Job(job_id=gang.job_id, submit_time=self._submit[gang.job_id], n_gpus=n_gpus,
                   duration_s=duration_s if duration_s > 0 else self.default_duration_s,
                   group=gang.namespace)

    # ---------------------------------------------------------------- build
    def _build(self, tracked: dict[str, _Tracked], raw_nodes: list[dict[str, Any]],
               bound: list[dict[str, Any]], wall: float, now: float) -> Snapshot:
        allocation = Allocation(self.topology)
        holding = sorted((t for t in tracked.values() if t.kind in ("running", "draining")),
                         key=lambda t: (self._run_start.get(t.job.job_id, -INF), t.job.job_id))
        claimed: set[tuple[str, str]] = set()
        running: dict[str, JobState] = {}
        for t in holding:
            gpu_ids = self._take(allocation, t)
            claimed.update(pod_key(p) for p in t.pods)
            t.state = self._running_state(t, gpu_ids, now)
            running[t.job.job_id] = t.state
        self._take_foreign(allocation, bound, claimed)
        self._take_unusable(allocation, raw_nodes)

        waiting = [t for t in tracked.values() if t.kind == "waiting"]
        pending = [t for t in tracked.values() if t.kind == "pending"]
        states = sorted((self._pending_state(t) for t in pending),
                        key=lambda s: (s.queued_since, s.job.submit_time, s.job_id))
        view = ClusterView(self.topology, allocation, {s.job_id: s for s in states}, running,
                           self.perf)
        view.now = now
        finished = {job_id: _finished_state(record) for job_id, record in self._records.items()}
        for t in tracked.values():
            if t.kind == "finished":
                record = self._record(t, wall, now)
                finished[record.job_id] = _finished_state(record)
        for job_id in [j for j, t in tracked.items() if t.kind == "finished"]:
            del tracked[job_id]
        return Snapshot(now=now, view=view, finished=finished, failed=dict(self._failed),
                        n_waiting=len(waiting), next_arrival=INF)

    def _take(self, allocation: Allocation, t: _Tracked) -> tuple[int, ...]:
        """Give a running job GPUs on the nodes its pods are bound to."""
        per_node: Counter[int] = Counter()
        for pod in t.pods:
            node_id = self._node_id.get(node_name(pod) or "")
            if node_id is not None:
                per_node[node_id] += pod_gpus(pod, self.gpu_resource)
        owner = allocation.owner
        intended = self._intended.get(t.job.job_id, ())
        if (intended and all(owner[g] is None for g in intended)
                and Counter(self.topology.gpu_node[g] for g in intended) == per_node):
            chosen = list(intended)
        else:
            chosen = []
            for node_id, count in sorted(per_node.items()):
                chosen.extend(allocation.free_gpu_ids(node_id)[:count])
        allocation.allocate(t.job.job_id, chosen)
        return tuple(sorted(chosen))

    def _take_foreign(self, allocation: Allocation, bound: list[dict[str, Any]],
                      claimed: set[tuple[str, str]]) -> None:
        for pod in sorted(bound, key=pod_key):
            key = pod_key(pod)
            node_id = self._node_id.get(node_name(pod) or "")
            if key in claimed or node_id is None:
                continue
            count = pod_gpus(pod, self.gpu_resource)
            if count:
                allocation.allocate(f"!pod:{key[0]}/{key[1]}",
                                    allocation.free_gpu_ids(node_id)[:count])

    def _take_unusable(self, allocation: Allocation, raw_nodes: list[dict[str, Any]]) -> None:
        by_name = {str((n.get("metadata") or {}).get("name")): n for n in raw_nodes}
        for node_id, name in enumerate(self.node_names):
            raw = by_name.get(name)
            reason = node_unusable(raw)
            free = allocation.free_gpu_ids(node_id)
            if reason is not None:
                allocation.allocate(f"!down:{name}", free)
            else:
                assert raw is not None
                missing = self.topology.nodes[node_id].n_gpus - node_gpus(raw, self.gpu_resource)
                if missing > 0:  # a device went unhealthy: hold the highest ids
                    allocation.allocate(f"!down:{name}", free[len(free) - min(missing, len(free)):])

    # --------------------------------------------------------------- states
    def _base_state(self, job: Job) -> JobState:
        state = JobState(job)
        prior_s = self._run_s.get(job.job_id, 0.0)
        rate = job.total_iters / job.duration_s if job.duration_s > 0 else 1.0
        state.iters_done = min(job.total_iters, prior_s * rate)
        state.run_time_s = prior_s
        state.attained_gpu_s = prior_s * job.n_gpus
        state.n_preemptions = self._n_preemptions.get(job.job_id, 0)
        state.queued_since = self._queued.get(job.job_id, job.submit_time)
        state.first_start = self._first_start.get(job.job_id)
        return state

    def _running_state(self, t: _Tracked, gpu_ids: tuple[int, ...], now: float) -> JobState:
        job_id = t.job.job_id
        if t.kind == "draining":  # holds its GPUs until its pods are gone, making no progress
            state = self._base_state(t.job)
            state.status = Status.RUNNING
            state.gpu_ids = gpu_ids
            state.run_start = state.last_update = state.busy_until = state.queued_since
            state.n_nodes, state.n_racks = self.topology.spread(gpu_ids) if gpu_ids else (0, 0)
            return state
        if job_id not in self._run_start:  # started before this backend was: ask the pods
            starts = [s for p in t.pods
                      if (s := parse_time((p.get("status") or {}).get("startTime"))) is not None]
            self._run_start[job_id] = min(now, self.wall_to_now(min(starts))) if starts else now
        start = self._run_start[job_id]
        self._first_start.setdefault(job_id, start)
        state = self._base_state(t.job)
        state.status = Status.RUNNING
        state.gpu_ids = gpu_ids
        state.run_start = state.last_update = state.busy_until = start
        state.first_start = self._first_start[job_id]
        state.rate_iters_per_s = self.perf.rate(t.job, gpu_ids, {}) if gpu_ids else 0.0
        state.n_nodes, state.n_racks = self.topology.spread(gpu_ids) if gpu_ids else (0, 0)
        return state

    def _pending_state(self, t: _Tracked) -> JobState:
        state = self._base_state(t.job)
        state.last_update = max(state.queued_since, t.job.submit_time)
        t.state = state
        return state

    def _record(self, t: _Tracked, wall: float, now: float) -> JobRecord:
        job = t.job
        job_id = job.job_id
        ends = [end for p in t.pods for end in _finished_at(p)]
        finish = min(now, self.wall_to_now(max(ends))) if ends else now
        starts = [s for p in t.pods
                  if (s := parse_time((p.get("status") or {}).get("startTime"))) is not None]
        run_start = self._run_start.get(job_id, self.wall_to_now(min(starts)) if starts else finish)
        finish = max(finish, run_start)
        run_time = self._run_s.get(job_id, 0.0) + finish - run_start
        first = self._first_start.get(job_id, run_start)
        nodes = {self._node_id[n] for p in t.pods if (n := node_name(p)) in self._node_id}
        racks = {self.topology.nodes[n].rack_id for n in nodes}
        jct = finish - job.submit_time
        record = JobRecord(
            job_id=job_id, group=job.group, model=None, n_gpus=job.n_gpus,
            submit_time=job.submit_time, first_start=first, finish_time=finish, jct_s=jct,
            queueing_delay_s=jct - run_time, run_time_s=run_time, overhead_s=0.0,
            gpu_s=run_time * job.n_gpus, n_preemptions=self._n_preemptions.get(job_id, 0),
            n_nodes=len(nodes), n_racks=len(racks), duration_s=job.duration_s,
            total_iters=job.total_iters)
        self._records[job_id] = record
        return record

    # ---------------------------------------------------------------- apply
    def apply(self, decisions: Decisions, snapshot: Snapshot) -> list[Outcome]:
        outcomes = [self._preempt(job_id, snapshot.now) for job_id in decisions.preempt]
        committed: Counter[int] = Counter()  # GPUs bound per node by earlier starts this round
        for start in decisions.start:
            outcomes.append(self._start(start, snapshot, committed))
        return outcomes

    def _preempt(self, job_id: str, now: float) -> Outcome:
        t = self._current.get(job_id)
        if t is None or t.kind not in ("running", "draining"):
            return Outcome("preempt", job_id, False, "not a running job this backend manages")
        nodes = self._hosts(t.pods)
        if t.kind == "draining":
            return Outcome("preempt", job_id, True, "already preempted; its pods are terminating",
                           nodes)
        assert t.gang is not None
        victims = t.gang.active
        errors = []
        for pod in victims:
            try:
                self.api.delete(*pod_key(pod))
            except KubeApiError as exc:
                errors.append(str(exc))
        if len(errors) == len(victims):
            return Outcome("preempt", job_id, False, errors[0] if errors else "no pod to delete",
                           nodes)
        self._requeue(t.job, now)
        self._intended.pop(job_id, None)
        t.kind = "draining"
        if errors:
            return Outcome("preempt", job_id, False, f"{len(errors)} of {len(victims)} pods not "
                           f"deleted: {errors[0]}", nodes)
        return Outcome("preempt", job_id, True, nodes=nodes)

    def _start(self, start: Start, snapshot: Snapshot, committed: Counter[int]) -> Outcome:
        job_id = start.job_id
        per_node = Counter(self.topology.gpu_node[g] for g in start.gpu_ids)
        hosts = tuple(self.node_names[n] for n in sorted(per_node))
        t = self._current.get(job_id)
        if t is None or t.kind != "pending" or t.gang is None:
            why = ("its pods are being recreated after a preemption" if t is not None
                   else "not a pending job this backend manages")
            return Outcome("start", job_id, False, why, hosts)
        view = snapshot.view
        free = {n: view.free_in_node(n) - committed[n] for n in sorted(per_node)}
        if any(count > free[n] for n, count in per_node.items()):
            return Outcome("start", job_id, False, "waits for the pods of a preempted job to "
                           "terminate; tried again next round", hosts)
        pods = sorted(t.gang.active, key=pod_key)
        requests = [pod_gpus(p, self.gpu_resource) for p in pods]
        exact = pack(requests, {self.node_names[n]: per_node[n] for n in sorted(per_node)})
        chosen = exact or pack(requests, {self.node_names[n]: free[n] for n in sorted(free)})
        if chosen is None:
            return Outcome("start", job_id, False, f"its pods (GPUs {requests}) do not fit the "
                           f"GPUs chosen on {','.join(hosts)}; no pod was bound", hosts)
        bound: list[Pod] = []
        for pod, node in zip(pods, chosen):
            try:
                self.api.bind(*pod_key(pod), node)
            except KubeApiError as exc:
                return Outcome("start", job_id, False, self._roll_back(job_id, bound, exc), hosts)
            bound.append(pod)
        for pod, node in zip(pods, chosen):
            committed[self._node_id[node]] += pod_gpus(pod, self.gpu_resource)
        self._run_start[job_id] = snapshot.now
        self._first_start.setdefault(job_id, snapshot.now)
        if exact is not None:
            self._intended[job_id] = tuple(start.gpu_ids)
        t.kind = "running"
        return Outcome("start", job_id, True, nodes=tuple(sorted(set(chosen),
                                                                 key=self._node_id.__getitem__)))

    def _undo_split(self, job: Job, placed: list[Pod], n_active: int, now: float) -> None:
        """Delete the bound pods of a gang found only partly bound, so it is placed whole.

        A scheduler stopped between the bindings of one gang leaves it so (a
        restarted serve finds it), as does a pod of a running gang that died and
        was recreated: either way its bound pods wait for peers that no binding
        will join. Deleting them is the rollback of a failed binding; the
        controller recreates them and the job is pending again.
        """
        log.warning("job %s has %d of %d pods bound; deleting the bound ones so the gang is "
                    "placed whole (its controller recreates them)", job.job_id, len(placed),
                    n_active)
        for pod in placed:
            try:
                self.api.delete(*pod_key(pod))
            except KubeApiError as exc:
                log.error("job %s: cannot delete pod %s: %s", job.job_id, pod_key(pod)[1], exc)
        self._requeue(job, now)

    def _requeue(self, job: Job, now: float) -> None:
        """Book a job whose pods were deleted: its run so far, one restart, back in the queue."""
        run_start = self._run_start.pop(job.job_id, now)
        self._run_s[job.job_id] = self._run_s.get(job.job_id, 0.0) + max(0.0, now - run_start)
        self._n_preemptions[job.job_id] = self._n_preemptions.get(job.job_id, 0) + 1
        self._queued[job.job_id] = now
        self._preempted[job.job_id] = (self._clock(), job)

    def _roll_back(self, job_id: str, bound: list[Pod], exc: KubeApiError) -> str:
        """Delete the pods of a gang bound before a binding failed; say what happened."""
        undone = 0
        for pod in bound:
            try:
                self.api.delete(*pod_key(pod))
                undone += 1
            except KubeApiError as error:
                log.error("job %s: cannot undo binding: %s", job_id, error)
        if not bound:
            return f"{exc}; no pod was bound"
        return (f"{exc}; deleted the {undone} of {len(bound)} pod(s) already bound so the gang "
                f"is not split (its controller recreates them)")

    def _hosts(self, pods: list[Pod]) -> tuple[str, ...]:
        names = {n for p in pods if (n := node_name(p)) is not None}
        return tuple(sorted(names, key=lambda n: (self._node_id.get(n, len(self._node_id)), n)))

    # ----------------------------------------------------------------- wait
    def wait(self, deadline: float) -> bool:
        target = self._clock() + self.poll_s
        if deadline < INF:
            target = min(target, self.now_to_wall(deadline))
        self._sleep(max(0.0, target - self._clock()))
        return True

    def records(self) -> list[JobRecord]:
        return sorted(self._records.values(), key=lambda r: (r.finish_time, r.job_id))


def _finished_at(pod: Pod) -> list[float]:
    """When each container of a pod terminated (Unix seconds), as the kubelet reported."""
    ends = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        end = parse_time(terminated.get("finishedAt"))
        if end is not None:
            ends.append(end)
    return ends


def _finished_state(record: JobRecord) -> JobState:
    state = JobState(Job(record.job_id, record.submit_time, record.n_gpus, record.duration_s,
                         record.total_iters, group=record.group))
    state.status = Status.FINISHED
    state.first_start = record.first_start
    state.finish_time = record.finish_time
    state.iters_done = record.total_iters
    state.run_time_s = record.run_time_s
    state.n_preemptions = record.n_preemptions
    return state
