"""What a new user meets first: the install covers the README, errors are one line, --version."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rackwise.cli import app
from rackwise.experiments import grid

RUNNER = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def test_plain_install_brings_what_the_readme_commands_import() -> None:
    # `pip install .` (README line 1) must cover `rackwise report` and `compare ... asrpt`
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {requirement.split(">")[0].split("=")[0] for requirement in project["dependencies"]}
    assert {"matplotlib", "scikit-learn"} <= names


def test_version_prints_the_package_version() -> None:
    result = RUNNER.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("rackwise ")
    assert result.output.split()[1][0].isdigit() or result.output.split()[1] == "unknown"


@pytest.mark.parametrize(("flags", "expected"), [
    (["--trace", "itp_2021", "--first-n", "0"], "error: first_n: Input should be greater than 0"),
    (["--trace-file", "jobs.parquet", "--format", "parquet"], "error: format: Input should be"),
])
def test_pydantic_errors_are_one_line_and_exit_2(flags: list[str], expected: str) -> None:
    result = RUNNER.invoke(app, ["simulate", *flags, "--policy", "fifo"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(expected)
    assert "https://" not in lines[0]


def test_compare_keeps_the_extra_in_its_hint_and_fails_on_a_skip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hint = "the random-forest predictor needs scikit-learn: pip install 'rackwise[ml]'"
    monkeypatch.setattr(grid, "policy_skip_reasons",
                        lambda experiment, source: {"asrpt": hint})
    result = RUNNER.invoke(app, ["compare", "--trace", "itp_2021", "--first-n", "50", "--nodes", "4",
                                 "--policies", "fifo,asrpt", "--jobs", "1", "--out", str(tmp_path / "c")])
    assert result.exit_code == 1, result.output
    assert "pip install 'rackwise[ml]'" in "".join(result.output.splitlines())  # rich wraps at 80
    assert "1 of 2 policies skipped" in result.output


def test_default_results_folder_names_every_parameter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    base = ["simulate", "--trace", "itp_2021", "--first-n", "50", "--nodes", "4", "--policy", "fifo"]
    for extra in ([], ["-p", "backfill=true"], ["-p", "backfill=true", "-p", "placement=best-fit"]):
        assert RUNNER.invoke(app, [*base, *extra]).exit_code == 0
    folders = sorted(path.name for path in (tmp_path / "results").iterdir())
    assert folders == ["itp_2021-fifo-backfill=true-placement=best-fit-s0",
                       "itp_2021-fifo-backfill=true-s0", "itp_2021-fifo-s0"]


def test_simulate_load_compresses_arrivals_and_names_its_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    base = ["simulate", "--trace", "itp_2021", "--first-n", "200", "--nodes", "16", "--policy", "fifo"]
    for extra in ([], ["--load", "4"]):
        assert RUNNER.invoke(app, [*base, *extra]).exit_code == 0
    plain = pd.read_parquet(tmp_path / "results" / "itp_2021-fifo-s0" / "jobs.parquet")
    busy = pd.read_parquet(tmp_path / "results" / "itp_2021-load4-fifo-s0" / "jobs.parquet")
    span = plain["submit_time"].max() - plain["submit_time"].min()
    assert busy["submit_time"].max() - busy["submit_time"].min() == pytest.approx(span / 4)
    assert busy["queueing_delay_s"].mean() > plain["queueing_delay_s"].mean()


def _readme_commands() -> list[list[str]]:
    """Each ``rackwise ...`` command of the README's code blocks, continuation lines joined, comments cut."""
    import shlex

    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        line = line.split("  #")[0].strip()
        if line.startswith("rackwise "):
            commands.append(shlex.split(line)[1:])
    return commands


def test_every_file_the_readme_names_ships() -> None:
    named = [arg for command in _readme_commands() for arg in command
             if arg.startswith(("examples/", "experiments/"))]
    assert named, "the README names no shipped file"
    missing = [path for path in named if not (ROOT / path).is_file()]
    assert not missing


def test_readme_bring_your_own_trace_command_runs_as_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [command] = [command for command in _readme_commands() if "--trace-file" in command]
    monkeypatch.chdir(ROOT)
    result = RUNNER.invoke(app, [*command, "--out", str(tmp_path / "own")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "own" / "jobs.parquet").is_file()


def test_unknown_gpu_type_flag_is_refused_with_the_known_types() -> None:
    result = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "10", "--nodes", "2",
                                 "--gpu-type", "rtx9090", "--policy", "fifo"])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert "--gpu-type" in line and "rtx9090" in line and "v100" in line


def test_unknown_gpu_type_in_a_cluster_file_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "rtx.yaml"
    spec.write_text("name: rtx\nnodes_per_rack: 2\nnode_groups:\n"
                    "  - {count: 2, gpus_per_node: 4, gpu_type: rtx9090}\n"
                    "links: {intra_rack_gbps: 100, cross_rack_gbps: 100}\n")
    result = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "10",
                                 "--cluster", str(spec), "--policy", "fifo", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert "rtx.yaml" in line and "node_groups.gpu_type" in line and "known types" in line
    assert "gpu_speedup_vs_v100" in line  # and says how to declare it


def test_a_cluster_file_declares_a_new_gpu_types_speed(tmp_path: Path) -> None:
    import json

    import pandas as pd

    def run(speedup: float) -> pd.DataFrame:
        # Three V100 nodes set the reference speed of trace durations; the fourth is the new type.
        spec = tmp_path / f"mixed-{speedup}.yaml"
        spec.write_text("nodes_per_rack: 4\nnode_groups:\n"
                        "  - {count: 3, gpus_per_node: 8, gpu_type: v100}\n"
                        "  - {count: 1, gpus_per_node: 8, gpu_type: rtx9090}\n"
                        f"gpu_speedup_vs_v100: {{rtx9090: {speedup}}}\n")
        out = tmp_path / f"run-{speedup}"
        result = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "40", "--cluster",
                                     str(spec), "--perf", "network", "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert json.loads((out / "summary.json").read_text())["figures"]["n_jobs"] == 40
        return pd.read_parquet(out / "jobs.parquet").set_index("job_id")

    same, faster = run(1.0), run(2.0)
    # Jobs that land on the new node run faster there; the others as before.
    quicker = faster["run_time_s"] < 0.9 * same["run_time_s"]
    assert quicker.any() and not (faster["run_time_s"] > 1.1 * same["run_time_s"]).any()
    bad = tmp_path / "bad.yaml"
    bad.write_text("node_groups:\n  - {count: 1, gpus_per_node: 8, gpu_type: rtx9090}\n"
                   "gpu_speedup_vs_v100: {rtx9090: 0}\n")
    refused = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "5", "--cluster", str(bad)])
    assert refused.exit_code == 2 and "gpu_speedup_vs_v100" in refused.output


def test_results_folder_is_not_private(tmp_path: Path) -> None:
    import os

    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "10", "--nodes", "2",
                                 "--policy", "fifo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask


def test_the_policy_list_shows_no_rest_markup() -> None:
    from typer.testing import CliRunner

    from rackwise.cli import app

    result = CliRunner().invoke(app, ["policies"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "`" not in result.output
    assert '(asrpt with predictor="oracle")' in result.output


def test_example_cluster_files_cite_only_files_that_ship() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).parents[2]
    for spec in sorted((root / "examples" / "clusters").glob("*.y*ml")):
        for cited in re.findall(r"[\w./-]+\.(?:md|ya?ml|csv|json|py|toml)\b", spec.read_text()):
            assert (root / cited).exists() or (spec.parent / cited).exists(), f"{spec.name} cites {cited}"


@pytest.mark.parametrize("kind", ["cluster", "experiment", "mapping"])
def test_a_yaml_file_that_does_not_parse_is_named_with_its_line(tmp_path: Path, kind: str) -> None:
    from rackwise.cluster.topology import load_cluster
    from rackwise.errors import InputError
    from rackwise.experiments.config import load_experiment
    from rackwise.workload.readers.csv import ColumnMapping

    bad = tmp_path / f"{kind}.yaml"
    bad.write_text("name: x\nnodes: 4\n  gpus_per_node: [8\n")
    read = {"cluster": load_cluster, "experiment": load_experiment, "mapping": ColumnMapping.from_yaml}[kind]
    with pytest.raises(InputError, match=rf"{kind}\.yaml:3: cannot parse.*") as caught:
        read(bad)
    assert "\n" not in str(caught.value)


def test_a_literal_nan_is_named_not_called_empty(tmp_path: Path) -> None:
    from rackwise.errors import InputError
    from rackwise.workload.readers.csv import read_csv

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,cluster,submit_time,duration,num_gpus\na,x,0,10,1\nb,x,5,nan,1\nc,x,6,,1\n")
    with pytest.raises(InputError, match=r"t\.csv:3, field 'duration': not a number: 'nan'"):
        read_csv(trace)
    trace.write_text("job_id,cluster,submit_time,duration,num_gpus\na,x,0,10,1\nc,x,6,,1\n")
    with pytest.raises(InputError, match=r"t\.csv:3, field 'duration': empty value"):
        read_csv(trace)


@pytest.mark.parametrize("command", [[], ["simulate"], ["compare"], ["sweep"], ["reproduce"], ["report"],
                                     ["serve"], ["forecast"], ["train-marl"], ["traces", "describe"]])
def test_help_fits_80_columns_without_cutting_anything(command: list[str]) -> None:
    result = RUNNER.invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_simulate_saves_the_snapshots_it_forecasts_from_for_rackwise_forecast(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "200", "--nodes", "4",
                                 "--policy", "tiresias", "--forecast-at", "20000", "--save-snapshots",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    snapshot = out / "snapshot-20000.json"
    forecast = RUNNER.invoke(app, ["forecast", "--snapshot", str(snapshot), "--json"])
    assert forecast.exit_code == 0, forecast.output
    assert '"job_id"' in forecast.output
    alone = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "20", "--save-snapshots",
                                "--out", str(tmp_path / "other")])
    assert alone.exit_code == 2 and "--save-snapshots" in alone.output
    assert len(alone.output.strip().splitlines()) == 1 and not (tmp_path / "other").exists()
