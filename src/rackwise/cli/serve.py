"""``rackwise serve``: run a policy against a real cluster manager (or the in-process fake).

Examples:
    rackwise serve --backend slurm --policy fifo --partition gpu
    rackwise serve --backend slurm --policy fifo --submit-trace philly_2017 --first-n 10 \\
        --time-scale 3600 --exit-when-idle
    rackwise serve --backend fake --policy fifo --submit-trace philly_2017 --first-n 100
    rackwise serve --backend kubernetes --policy tiresias --scheduler-name rackwise
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from rackwise.cli.errors import reported
from rackwise.cli.params import parse_params
from rackwise.errors import InputError


def serve(
    backend: Annotated[str, typer.Option(
        help="slurm, kubernetes, or fake (an in-process simulated cluster).")] = "slurm",
    policy: Annotated[str, typer.Option(help="Scheduling policy (see `rackwise policies`).")] = "fifo",
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="Policy parameter key=value (repeatable).")] = None,
    cluster: Annotated[Path | None, typer.Option(
        help=("Cluster spec (YAML/TOML); for slurm it must list the partition's GPU nodes in name order. Default "
              "for slurm: read from Slurm."))] = None,
    partition: Annotated[str | None, typer.Option(help="Slurm partition to schedule (default: all nodes).")] = None,
    poll_s: Annotated[float, typer.Option(help="Real seconds between reads of the cluster's state.")] = 1.0,
    time_scale: Annotated[float, typer.Option(
        help="Workload seconds per real second for a submitted trace (3600: a trace hour per second).")] = 3600.0,
    submit_trace: Annotated[str | None, typer.Option(
        help="Submit this shipped trace's jobs (held) before serving.")] = None,
    trace_file: Annotated[Path | None, typer.Option(help="Or submit jobs from this trace file (csv).")] = None,
    first_n: Annotated[int | None, typer.Option(help="Submit only the first N jobs of the trace.")] = None,
    start_s: Annotated[float | None, typer.Option(
        help="Submit jobs from this trace second on (the window is shifted to start at 0).")] = None,
    end_s: Annotated[float | None, typer.Option(help="Submit jobs before this trace second.")] = None,
    max_gpus: Annotated[int | None, typer.Option(help="Leave out jobs asking for more GPUs than this.")] = None,
    output_dir: Annotated[Path | None, typer.Option(
        help="Folder for the replayed jobs' Slurm output (must be visible to the nodes).")] = None,
    submit_only: Annotated[bool, typer.Option(help="Submit the trace and exit without serving.")] = False,
    exit_when_idle: Annotated[bool, typer.Option(
        help="Stop once no managed job is pending, running or to arrive.")] = False,
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve Prometheus metrics on this port (needs the serve extra).")] = None,
    metrics_addr: Annotated[str, typer.Option(help="Address for the metrics endpoint.")] = "127.0.0.1",
    forecast_port: Annotated[int | None, typer.Option(
        help=("Serve GET /forecast (JSON) on this port, on --metrics-addr; with --metrics-port also forecast "
              "gauges."))] = None,
    forecast_every_s: Annotated[float, typer.Option(help="Wall seconds between forecasts for --forecast-port.")] = 30.0,
    decision_log: Annotated[Path | None, typer.Option(
        help="Append every decision as a JSON line to this file.")] = None,
    records_out: Annotated[Path | None, typer.Option(help="Write finished jobs' records (CSV) here on exit.")] = None,
    state_file: Annotated[Path | None, typer.Option(
        help="Keep serve's state (the policy's included) here, saved every round; a serve restarted "
             "with the same file and policy goes on where it stopped.")] = None,
    max_outage_s: Annotated[float | None, typer.Option(
        help="Exit when the cluster has not answered for this many seconds (default: keep "
             "asking, with backoff).")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(
        help="kubernetes: kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).")] = None,
    scheduler_name: Annotated[str, typer.Option(
        help="kubernetes: schedule pods with this spec.schedulerName.")] = "rackwise",
    namespace: Annotated[str | None, typer.Option(
        help="kubernetes: only schedule pods of this namespace (default: all).")] = None,
    rack_label: Annotated[str, typer.Option(
        help="kubernetes: node label naming each node's rack.")] = "topology.kubernetes.io/zone",
    nodes: Annotated[int, typer.Option(help="fake backend: nodes of a homogeneous cluster.")] = 4,
    gpus_per_node: Annotated[int, typer.Option(help="fake backend: GPUs per node.")] = 4,
    nodes_per_rack: Annotated[int, typer.Option(help="fake backend: nodes per rack.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the policy's random choices.")] = 0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every decision.")] = False,
) -> None:
    """Schedule jobs on a cluster manager with POLICY, one round every --poll-s seconds.

    Jobs are rackwise's when their Slurm comment starts with ``rackwise``;
    --submit-trace submits a trace window that way, held. See docs/real-clusters.md.
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")
    console = Console(stderr=True)
    with reported():
        from rackwise.backends.base import refuse_forking
        from rackwise.backends.base import serve as serve_loop
        from rackwise.policies.registry import make_policy

        chosen = make_policy(policy, **parse_params(param, "--param"))
        refuse_forking(chosen)
        jobs = _trace_jobs(submit_trace, trace_file, first_n, start_s, end_s, max_gpus)
        if backend == "slurm":
            the_backend, poll_workload_s = _slurm_backend(
                jobs, cluster, partition, poll_s, time_scale, output_dir, submit_only, console)
            if the_backend is None:
                return
        elif backend == "fake":
            the_backend, poll_workload_s = _fake_backend(jobs, cluster, nodes, gpus_per_node,
                                                         nodes_per_rack, seed), None
            exit_when_idle = True
        elif backend == "kubernetes":
            if jobs:
                raise InputError("the kubernetes backend schedules pods that exist; it submits "
                                 "no trace", field="--submit-trace")
            from rackwise.backends.kubernetes import KubernetesBackend
            from rackwise.backends.kubernetes_api import KubeApi

            the_backend, poll_workload_s = KubernetesBackend(
                api=KubeApi(kubeconfig=kubeconfig), scheduler_name=scheduler_name,
                namespace=namespace, rack_label=rack_label, poll_s=poll_s), None
        else:
            raise InputError(f"unknown backend '{backend}'; known: slurm, kubernetes, fake",
                             field="--backend")

        observers: list[Any] = []
        metrics = None
        if metrics_port is not None:
            from rackwise.backends.metrics import ServeMetrics

            metrics = ServeMetrics()
            port = metrics.start_http(metrics_port, metrics_addr)
            console.print(f"metrics on http://{metrics_addr}:{port}/metrics")
            observers.append(metrics)
        forecaster = None
        if forecast_port is not None:
            from rackwise.forecast.service import ForecastService

            forecaster = ForecastService(
                policy, parse_params(param, "--param"), every_s=forecast_every_s,
                node_names=getattr(the_backend, "node_names", ()),
                registry=metrics.registry if metrics is not None else None)
            port = forecaster.start_http(forecast_port, metrics_addr)
            console.print(f"forecast on http://{metrics_addr}:{port}/forecast")
            observers.append(forecaster)
        log_file = decision_log.open("a") if decision_log is not None else None
        stopping: list[int] = []

        def stop(signum: int, frame: object) -> None:
            stopping.append(signum)

        previous = signal.signal(signal.SIGTERM, stop)

        def on_decision(record: Any) -> None:
            if log_file is not None:
                log_file.write(json.dumps(record_dict(record)) + "\n")
                log_file.flush()

        try:
            result = serve_loop(the_backend, chosen, poll_s=poll_workload_s, seed=seed,
                                exit_when_idle=exit_when_idle, should_stop=lambda: bool(stopping),
                                observers=observers, on_decision=on_decision, state_file=state_file,
                                max_outage_s=max_outage_s)
        except KeyboardInterrupt:
            console.print("interrupted")
            return
        finally:
            signal.signal(signal.SIGTERM, previous)
            if log_file is not None:
                log_file.close()
            if metrics is not None:
                metrics.close()
            if forecaster is not None:
                forecaster.close()
        if records_out is not None:
            from rackwise.metrics.summary import records_frame

            records_out.parent.mkdir(parents=True, exist_ok=True)
            records_frame(result.records).to_csv(records_out, index=False)
    console.print(f"{len(result.records)} jobs finished, {len(result.decisions)} decisions, "
                  f"{result.n_rounds} rounds")


def record_dict(record: Any) -> dict[str, Any]:
    """A decision record as JSON-ready data."""
    return {"now": record.now, "wall_time": record.wall_time, "action": record.action,
            "job_id": record.job_id, "gpu_ids": list(record.gpu_ids), "nodes": list(record.nodes),
            "ok": record.ok, "detail": record.detail}


def _trace_jobs(trace: str | None, trace_file: Path | None, first_n: int | None,
                start_s: float | None, end_s: float | None, max_gpus: int | None) -> list[Any]:
    if trace is None and trace_file is None:
        return []
    from rackwise.run import WorkloadConfig, load_workload

    workload = load_workload(WorkloadConfig(trace=trace, file=trace_file, start_s=start_s,
                                            end_s=end_s, first_n=first_n if max_gpus is None else None))
    jobs = [job for job in workload if max_gpus is None or job.n_gpus <= max_gpus]
    if max_gpus is not None and first_n is not None:
        jobs = jobs[:first_n]
    if jobs:
        origin = jobs[0].submit_time
        jobs = [job.with_changes(submit_time=job.submit_time - origin) for job in jobs]
    return jobs


def _slurm_backend(jobs: list[Any], cluster: Path | None, partition: str | None, poll_s: float,
                   time_scale: float, output_dir: Path | None, submit_only: bool,
                   console: Console) -> tuple[Any, None]:
    from rackwise.backends.slurm import SlurmBackend
    from rackwise.backends.slurm_cli import SlurmCli
    from rackwise.backends.slurm_jobs import submit_held
    from rackwise.cluster.topology import load_cluster

    cli = SlurmCli()
    topology = load_cluster(cluster) if cluster is not None else None
    backend = SlurmBackend(cli=cli, partition=partition, topology=topology, poll_s=poll_s)
    if jobs:
        for job in jobs:
            if job.n_gpus > backend.topology.n_gpus:
                raise InputError(f"job {job.job_id} asks for {job.n_gpus} GPUs but the partition "
                                 f"has {backend.topology.n_gpus}; use --max-gpus", field="n_gpus")
        if output_dir is not None:
            output_dir.mkdir(parents=True, exist_ok=True)
        ids = submit_held(cli, jobs, time_scale=time_scale, partition=partition,
                          output_dir=output_dir.resolve() if output_dir else None)
        console.print(f"submitted {len(ids)} jobs held (Slurm ids {min(ids.values())}-"
                      f"{max(ids.values())})")
    if submit_only:
        return None, None
    return backend, None


def _fake_backend(jobs: list[Any], cluster: Path | None, nodes: int, gpus_per_node: int,
                  nodes_per_rack: int, seed: int) -> Any:
    from rackwise.backends.fake import FakeBackend
    from rackwise.cluster.topology import load_cluster, uniform_cluster

    if not jobs:
        raise InputError("the fake backend replays a trace: give --submit-trace or --trace-file",
                         field="--submit-trace")
    topology = (load_cluster(cluster) if cluster is not None
                else uniform_cluster(nodes, gpus_per_node, nodes_per_rack))
    return FakeBackend(topology, jobs, seed=seed)
