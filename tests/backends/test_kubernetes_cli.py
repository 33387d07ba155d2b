"""``rackwise serve --backend kubernetes``: a kubeconfig run against the loopback API server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import typer
import yaml
from typer.testing import CliRunner

from rackwise.cli.serve import serve

app = typer.Typer()
app.command()(serve)


def test_without_the_k8s_extra_the_backend_is_a_one_line_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    result = CliRunner().invoke(app, ["--backend", "kubernetes"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "pip install 'rackwise[k8s]'" in lines[0]


def test_a_trace_cannot_be_submitted_to_kubernetes() -> None:
    result = CliRunner().invoke(app, ["--backend", "kubernetes", "--submit-trace", "philly_2017"])
    assert result.exit_code == 2 and "submits no trace" in result.output


def test_serve_binds_pods_through_a_kubeconfig(tmp_path: Path) -> None:
    pytest.importorskip("kubernetes")
    from fake_apiserver import FakeApiServer

    log, records = tmp_path / "decisions.jsonl", tmp_path / "records.csv"
    with FakeApiServer() as server:
        server.add_node("n1", 4, zone="r1")
        server.add_node("n2", 4, zone="r2")
        server.add_pod("a-0", 4, job="a", size=2, namespace="ml", run_s=0.1)
        server.add_pod("a-1", 4, job="a", size=2, namespace="ml", run_s=0.1)
        server.add_pod("b", 2, namespace="ml", run_s=0.1)
        server.add_pod("elsewhere", 1, namespace="other")  # outside --namespace: never bound
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
            "users": [{"name": "tester", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}]}))
        result = CliRunner().invoke(app, [
            "--backend", "kubernetes", "--kubeconfig", str(kubeconfig), "--namespace", "ml",
            "--policy", "fifo", "--poll-s", "0.02", "--exit-when-idle",
            "--decision-log", str(log), "--records-out", str(records)])
        assert server.node_of("elsewhere", "other") is None
        assert server.violations == []
    assert result.exit_code == 0, result.output
    decisions = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(d["job_id"], d["ok"], d["nodes"]) for d in decisions] == [
        ("ml/a", True, ["n1", "n2"]), ("ml/b", True, ["n1"])]
    assert sorted(pd.read_csv(records)["job_id"]) == ["ml/a", "ml/b"]


DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def test_the_manifests_grant_what_the_backend_calls_and_run_known_options() -> None:
    rbac = list(yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text()))
    [role] = [d for d in rbac if d["kind"] == "ClusterRole"]
    verbs = {resource: set(rule["verbs"]) for rule in role["rules"]
             for resource in rule["resources"]}
    assert {"list"} <= verbs["nodes"] and {"list", "delete"} <= verbs["pods"]
    assert verbs["pods/binding"] == {"create"}
    [account] = [d for d in rbac if d["kind"] == "ServiceAccount"]
    [binding] = [d for d in rbac if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]

    [deployment] = yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert deployment["metadata"]["namespace"] == account["metadata"]["namespace"]
    args = pod["containers"][0]["args"]
    assert args[:3] == ["serve", "--backend", "kubernetes"]
    assert args[args.index("--policy") + 1] == "tiresias"
    command = typer.main.get_command(app)
    known = {opt for param in command.params for opt in param.opts}
    assert {a for a in args if a.startswith("--")} <= known
