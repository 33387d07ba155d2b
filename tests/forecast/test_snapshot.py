"""The snapshot record: JSON round trip, and one-line errors for inconsistent input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rackwise.engine.snapshot import ClusterSnapshot, copy_state, from_json, load, save, to_json, validate
from rackwise.errors import InputError
from rackwise.forecast.forward import forward


def test_json_round_trip_keeps_every_field(snapshot: ClusterSnapshot, tmp_path: Path) -> None:
    path = save(snapshot, tmp_path / "snap.json")
    again = load(path)
    assert to_json(again) == to_json(snapshot)
    assert [s.job_id for s in again.pending] == [s.job_id for s in snapshot.pending]
    assert forward(again).jobs == forward(snapshot).jobs


def test_a_state_carries_its_id_in_its_job_alone(snapshot: ClusterSnapshot) -> None:
    data = to_json(snapshot)
    states = data["running"] + data["pending"]
    assert states and all("job_id" not in s and s["job"]["job_id"] for s in states)
    again = from_json(json.loads(json.dumps(data)))
    assert all(s.job_id == s.job.job_id for s in (*again.running, *again.pending))


def test_snapshot_is_not_empty(snapshot: ClusterSnapshot) -> None:
    assert snapshot.running and snapshot.pending and snapshot.policy_state is not None


def _with_running_gpus(snapshot: ClusterSnapshot, gpu_ids: tuple[int, ...]) -> ClusterSnapshot:
    state = copy_state(snapshot.running[0])
    state.gpu_ids = gpu_ids
    return replace(snapshot, running=(state, *snapshot.running[1:]))


def test_job_on_a_gpu_that_does_not_exist(snapshot: ClusterSnapshot) -> None:
    n = snapshot.running[0].job.n_gpus
    bad = _with_running_gpus(snapshot, tuple(range(1000, 1000 + n)))
    with pytest.raises(InputError, match="GPU 1000, which does not exist"):
        validate(bad)


def test_two_jobs_on_one_gpu(snapshot: ClusterSnapshot) -> None:
    bad = replace(snapshot, held_gpus={"!down:n0": snapshot.running[0].gpu_ids[:1]})
    with pytest.raises(InputError, match="held by both"):
        validate(bad)


def test_more_gpus_in_use_than_the_node_has(snapshot: ClusterSnapshot) -> None:
    data = to_json(snapshot)
    data["topology"]["nodes"] = [[0, "v100", 1], [0, "v100", 1]]  # 2 GPUs left, more in use
    with pytest.raises(InputError, match=r"does not exist|asks for"):
        from_json(data, source="snap.json")


def test_wrong_gpu_count(snapshot: ClusterSnapshot) -> None:
    bad = _with_running_gpus(snapshot, (*snapshot.running[0].gpu_ids, 15))
    with pytest.raises(InputError, match="holds"):
        validate(bad)


def test_stale_snapshot(snapshot: ClusterSnapshot) -> None:
    live = replace(snapshot, taken_wall_s=1_000.0)
    validate(live, now_s=1_010.0, max_age_s=60.0)
    with pytest.raises(InputError, match="stale: taken 100 s ago"):
        validate(live, now_s=1_100.0, max_age_s=60.0)
    with pytest.raises(InputError, match="no wall time"):
        validate(snapshot, now_s=1_100.0, max_age_s=60.0)


def test_non_positive_prediction(snapshot: ClusterSnapshot) -> None:
    job_id = snapshot.pending[0].job_id
    bad = replace(snapshot, predicted_duration_s={**snapshot.predicted_duration_s, job_id: 0.0})
    with pytest.raises(InputError, match=f"job {job_id} has predicted duration 0.0"):
        validate(bad)


@pytest.mark.parametrize("text,message", [
    ("{", "cannot read JSON"),
    ('{"format": "other"}', "expected 'format'"),
    ('{"format": "rackwise-snapshot/1"}', "not a rackwise snapshot"),
])
def test_bad_files_name_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as error:
        load(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such snapshot file"):
        load(tmp_path / "absent.json")


def test_json_is_plain_data(snapshot: ClusterSnapshot) -> None:
    text = json.dumps(to_json(snapshot))
    assert json.loads(text)["format"] == "rackwise-snapshot/1"
