"""Snapshots of real clusters, by backend name; an unreachable one is an `InputError`."""

from __future__ import annotations

import time
from pathlib import Path

from rackwise.backends.base import BackendError, snapshot_of_backend
from rackwise.engine.snapshot import ClusterSnapshot
from rackwise.errors import InputError, MissingExtraError

BACKENDS = ("slurm", "kubernetes")


def snapshot_from_backend(name: str, *, partition: str | None = None,
                          cluster: Path | None = None, namespace: str | None = None,
                          scheduler_name: str = "rackwise") -> ClusterSnapshot:
    """Read the named cluster manager once and describe it as a snapshot.

    Raises:
        InputError: unknown backend, unreachable cluster manager, or an
            inconsistent state (a job on a node that does not exist ...).
    """
    try:
        if name == "slurm":
            from rackwise.backends.slurm import SlurmBackend
            from rackwise.cluster.topology import load_cluster

            topology = load_cluster(cluster) if cluster is not None else None
            backend = SlurmBackend(partition=partition, topology=topology)
        elif name == "kubernetes":
            from rackwise.backends.kubernetes import KubernetesBackend

            backend = KubernetesBackend(namespace=namespace,  # type: ignore[assignment]
                                        scheduler_name=scheduler_name)
        else:
            raise InputError(f"unknown backend '{name}'; known: {', '.join(BACKENDS)}",
                             field="--backend")
        snapshot = snapshot_of_backend(backend)
    except (BackendError, OSError, MissingExtraError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"cannot read the {name} cluster: {first}", field="--backend") from None
    return snapshot


def age_s(snapshot: ClusterSnapshot) -> float | None:
    """Seconds since a real cluster's snapshot was taken (None for simulations)."""
    return None if snapshot.taken_wall_s is None else time.time() - snapshot.taken_wall_s
