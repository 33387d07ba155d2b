"""`rackwise serve` refuses, before its first round, a policy that forks jobs into copies."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rackwise.cli import app

RUNNER = CliRunner()
FAKE = ["serve", "--backend", "fake", "--nodes", "2", "--gpus-per-node", "4", "--submit-trace", "philly_2017",
        "--first-n", "5"]


def test_combined_with_copies_is_refused_in_one_line_that_says_how_to_turn_them_off() -> None:
    result = RUNNER.invoke(app, [*FAKE, "--policy", "combined", "-p", "predictor=oracle"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "forks jobs into copies" in lines[0] and "-p copies=false" in lines[0]


def test_combined_without_copies_serves() -> None:
    result = RUNNER.invoke(app, [*FAKE, "--policy", "combined", "-p", "predictor=oracle", "-p", "copies=false"])
    assert result.exit_code == 0, result.output
    assert "5 jobs finished" in result.output


@pytest.mark.parametrize("name", ["hadare"])
def test_a_policy_that_always_forks_is_told_to_use_the_simulator(name: str) -> None:
    result = RUNNER.invoke(app, [*FAKE, "--policy", name])
    assert result.exit_code != 0
    assert "rackwise simulate" in result.output and "copies=false" not in result.output
