"""Finding and reading results folders, and grouping runs by policy and seed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from handmade_runs import write_run

from rackwise.errors import InputError
from rackwise.report.groups import baseline_of, choose_baseline, group_runs
from rackwise.report.load import discover, load_runs, read_jobs, read_timeline


def test_one_results_folder_is_one_run(tmp_path: Path) -> None:
    write_run(tmp_path / "r", "fifo", 3)
    runs = load_runs(tmp_path / "r")
    assert [(r.name, r.policy, r.seed, r.n_gpus) for r in runs] == [("r", "fifo", 3, 4)]


def test_nested_folders_are_found_and_staging_folders_skipped(tmp_path: Path) -> None:
    write_run(tmp_path / "sweep" / "cell-1" / "fifo-s0", "fifo", 0)
    write_run(tmp_path / "sweep" / "cell-0" / "sjf-s0", "sjf", 0)
    write_run(tmp_path / "sweep" / ".fifo-s1.abc123", "fifo", 1)  # half-written
    (tmp_path / "sweep" / "results.parquet").write_bytes(b"not read when folders exist")
    found = discover(tmp_path / "sweep")
    assert [p.relative_to(tmp_path / "sweep").as_posix() for p in found] == [
        "cell-0/sjf-s0", "cell-1/fifo-s0"]


def test_runs_group_by_policy_and_sort_by_seed(tmp_path: Path) -> None:
    for policy, seed in [("sjf", 1), ("fifo", 2), ("sjf", 0), ("fifo", 0)]:
        write_run(tmp_path / f"{policy}-{seed}", policy, seed)
    groups = group_runs(load_runs(tmp_path))
    assert [(g.label, g.seeds) for g in groups] == [("fifo", [0, 2]), ("sjf", [0, 1])]


def test_other_varying_settings_split_groups(tmp_path: Path) -> None:
    for nodes in (1, 2):
        for policy in ("fifo", "sjf"):
            write_run(tmp_path / f"{policy}-n{nodes}", policy, 0,
                      config={"cluster": {"nodes": nodes, "gpus_per_node": 4, "spec": None}})
    groups = group_runs(load_runs(tmp_path))
    labels = [g.label for g in groups]
    assert labels == ["fifo (nodes=1)", "sjf (nodes=1)", "fifo (nodes=2)", "sjf (nodes=2)"]
    base = baseline_of(groups[3], groups, "fifo")
    assert base is not None and base.label == "fifo (nodes=2)"


def test_settings_that_follow_others_are_not_in_labels(tmp_path: Path) -> None:
    # Each trace comes with its own start time; the trace's name is enough.
    for trace, start_s in (("philly", 10.0), ("itp", 20.0)):
        for seed in (0, 1):
            write_run(tmp_path / f"{trace}-{seed}", "fifo", seed,
                      config={"workload": {"trace": trace, "start_s": start_s}})
    groups = group_runs(load_runs(tmp_path))
    assert [(g.label, g.seeds) for g in groups] == [("fifo (trace=itp)", [0, 1]),
                                                    ("fifo (trace=philly)", [0, 1])]


def test_same_config_and_seed_twice_is_refused(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "fifo", 0)
    write_run(tmp_path / "old" / "a", "fifo", 0)
    with pytest.raises(InputError, match="same configuration and seed 0: 'a' and 'old/a'"):
        group_runs(load_runs(tmp_path))


def test_baseline_defaults_to_fifo_and_rejects_unknown(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "sjf", 0)
    write_run(tmp_path / "b", "fifo", 0)
    write_run(tmp_path / "c", "tiresias", 0)
    groups = group_runs(load_runs(tmp_path))
    assert choose_baseline(groups, None) == "fifo"
    assert choose_baseline(groups[1:], None) == "sjf"  # no fifo: the first group
    with pytest.raises(InputError, match="Did you mean 'tiresias'"):
        choose_baseline(groups, "tiresia")


def test_sweep_table_without_folders(tmp_path: Path) -> None:
    pd.DataFrame({"policy": ["fifo", "fifo", "sjf"], "trace": ["t"] * 3, "seed": [0, 1, 0],
                  "avg_jct_s": [10.0, 12.0, 5.0], "utilisation": [0.5, 0.6, 0.7]}
                 ).to_parquet(tmp_path / "results.parquet")
    runs = load_runs(tmp_path)
    assert [(r.name, r.policy, r.seed, r.path) for r in runs] == [
        ("results.parquet#0", "fifo", 0, None), ("results.parquet#1", "fifo", 1, None),
        ("results.parquet#2", "sjf", 0, None)]
    assert runs[1].figures == {"avg_jct_s": 12.0, "utilisation": 0.6}
    assert runs[1].config == {"policy": "fifo", "trace": "t", "seed": 1}
    assert read_jobs(runs[0]) is None and read_timeline(runs[0]) is None


def test_sweep_table_rows_that_did_not_run_are_left_out(tmp_path: Path) -> None:
    pd.DataFrame({"policy": ["fifo", "fifo", "sjf", "sjf"], "seed": [0, 1, 0, 1],
                  "policy_params": ["{}", "{}", '{"x": 1}', '{"x": 1}'],
                  "key": ["k1", "k2", "k3", "k4"], "status": ["ran", "cached", "failed", "ran"],
                  "avg_jct_s": [10.0, 12.0, float("nan"), 5.0], "n_gpus": [8, 8, 8, 8],
                  "wall_time_s": [1.0, 2.0, 3.0, 4.0]}).to_parquet(tmp_path / "results.parquet")
    runs = load_runs(tmp_path)
    assert [(r.name, r.policy, r.seed, r.n_gpus) for r in runs] == [
        ("k1", "fifo", 0, 8), ("k2", "fifo", 1, 8), ("k4", "sjf", 1, 8)]
    # Neither the cell key nor the policies' differing parameters split a policy's runs.
    assert [(g.label, g.seeds) for g in group_runs(runs)] == [("fifo", [0, 1]), ("sjf", [1])]


def test_table_with_no_finished_cell(tmp_path: Path) -> None:
    pd.DataFrame({"policy": ["fifo"], "status": ["failed"], "avg_jct_s": [float("nan")]}
                 ).to_parquet(tmp_path / "results.parquet")
    with pytest.raises(InputError, match=r"results\.parquet: the table has no finished cells"):
        load_runs(tmp_path)


def test_tables_are_read_from_parquet_or_csv(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "r", "fifo", 0)
    (folder / "timeline.parquet").unlink()
    pd.DataFrame({"time": [0.0], "busy_gpus": [1], "n_pending": [2], "n_running": [1]}
                 ).to_csv(folder / "timeline.csv", index=False)
    run = load_runs(folder)[0]
    assert list(read_timeline(run).columns) == ["time", "busy_gpus", "n_pending"]  # type: ignore[union-attr]
    assert read_jobs(run)["jct_s"].tolist() == [10.0, 20.0, 30.0]  # type: ignore[index]


# --- bad input: one InputError naming the path --------------------------------------------

def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=f"^{tmp_path / 'nope'}: no such folder$"):
        load_runs(tmp_path / "nope")


def test_a_file_is_not_a_results_folder(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(InputError, match=r"x\.json: not a folder"):
        load_runs(tmp_path / "x.json")


def test_folder_without_runs(tmp_path: Path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(InputError, match=r"empty: not a results folder: no summary\.json"):
        load_runs(tmp_path / "empty")


def test_corrupt_summary_names_file_and_line(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "r", "fifo", 0)
    (folder / "summary.json").write_text('{"figures": {\n  "n_jobs": 3,,\n}')
    with pytest.raises(InputError, match=r"summary\.json:2: corrupt JSON") as info:
        load_runs(tmp_path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text, complaint", [
    ("[1, 2]", "expected a JSON object"),
    ('{"figures": {"n_jobs": 1}}', "no config.policy"),
    ('{"config": {"policy": "fifo"}, "figures": {"n_jobs": 0}}', "no figures"),
    ('{"config": {"policy": "fifo", "seed": "x"}, "figures": {"n_jobs": 1}}', "integer"),
])
def test_summary_without_what_a_report_needs(tmp_path: Path, text: str, complaint: str) -> None:
    (tmp_path / "summary.json").write_text(text)
    with pytest.raises(InputError, match=complaint) as info:
        load_runs(tmp_path)
    assert str(tmp_path / "summary.json") in str(info.value)


def test_missing_and_corrupt_tables(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "r", "fifo", 0)
    (folder / "jobs.parquet").unlink()
    run = load_runs(folder)[0]
    with pytest.raises(InputError, match=r"r: missing jobs\.parquet \(or jobs\.csv\)"):
        read_jobs(run)
    (folder / "timeline.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(InputError, match=r"timeline\.parquet: cannot read table"):
        read_timeline(run)


def test_table_without_needed_column(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "r", "fifo", 0)
    pd.DataFrame({"jct_s": [1.0]}).to_parquet(folder / "jobs.parquet")
    with pytest.raises(InputError, match=r"jobs\.parquet: missing column.s. queueing_delay_s"):
        read_jobs(load_runs(folder)[0])


def test_a_sweeps_runs_are_grouped_and_named_by_the_experiment_labels(tmp_path: Path) -> None:
    from tests.experiments.conftest import EXPERIMENTS

    from rackwise.experiments import load_experiment, plan, run_cells
    from rackwise.report.groups import choose_baseline, group_runs

    smoke = EXPERIMENTS / "smoke.yaml"
    experiment = load_experiment(smoke).model_copy(update={"baseline": "tiresias-packed"})
    run_cells(plan(experiment, str(smoke)), tmp_path, jobs=1)
    groups = group_runs(load_runs(tmp_path))
    # 2 policies x 2 workloads x 2 loads, each repeated over the 2 seeds
    assert len(groups) == 8 and all(g.seeds == [0, 1] for g in groups)
    labels = {g.label for g in groups}
    assert "tiresias-packed (load=2.0, workload=itp)" in labels
    assert "fifo (load=1.0, workload=philly)" in labels
    # The experiment's baseline, not fifo, unless another is asked for.
    assert choose_baseline(groups, None) == "tiresias-packed"
    assert choose_baseline(groups, "fifo") == "fifo"
