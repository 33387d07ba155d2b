"""The public API: every name imports lazily from `rackwise`, is documented, and the doc's example runs."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import rackwise

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


@pytest.mark.parametrize("name", [n for n in rackwise.__all__ if n != "__version__"])
def test_each_public_name_imports_and_is_documented(name: str) -> None:
    assert getattr(rackwise, name) is not None
    assert f"`{name}" in DOC.read_text() or f" `{name}`" in DOC.read_text()


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        rackwise.simulat  # noqa: B018


def test_importing_rackwise_imports_no_heavy_library() -> None:
    code = "import sys, rackwise; print(sorted({'pandas', 'numpy', 'scipy'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


def test_the_documented_example_runs() -> None:
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert example is not None
    exec(compile(example.group(1), str(DOC), "exec"), {})


def test_a_result_summarises_itself_and_prints_short() -> None:
    from rackwise.metrics.summary import summarize

    jobs = rackwise.load_trace("itp_2021", first_n=50)
    result = rackwise.simulate(rackwise.uniform_cluster(2, 8, 2), jobs, rackwise.make_policy("fifo"))
    assert result.summary() == summarize(result.records, result.timeline, 16)
    assert repr(result) == f"SimResult(fifo on 50 jobs, 16 GPUs, seed 0, {result.n_steps:,} steps)"
