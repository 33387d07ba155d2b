"""benchmarks/spy_summary.py: a py-spy raw profile summed per function, and one function's callees."""

from __future__ import annotations

from pathlib import Path

from tests.benchmark_scripts import load_script

spy_summary = load_script("spy_summary")

# Stacks outermost first, then the sample count; line numbers differ between samples of a function.
PROFILE = """\
main (run.py:3);schedule (policy.py:10);rank (policy.py:20) 5
main (run.py:3);schedule (policy.py:11) 2
main (run.py:4);CPyPy_m___f (native.c:7);CPyDef_m___f (native.c:9);Py_DECREF (object.h:600) 3
main (run.py:4);CPyPy_m___f (native.c:7);CPyDef_m___f (native.c:12);CPyDef_m___g (native.c:40) 4
main (run.py:5);schedule (policy.py:12);rank (policy.py:21);schedule (policy.py:13) 1
"""


def _profile(tmp_path: Path) -> Path:
    path = tmp_path / "profile.txt"
    path.write_text(PROFILE)
    return path


def test_summarise_counts_each_function_once_per_sample(tmp_path: Path) -> None:
    total, inclusive, own = spy_summary.summarise(_profile(tmp_path))
    assert total == 15
    assert inclusive["main (run.py)"] == 15
    assert inclusive["schedule (policy.py)"] == 8  # the recursive sample counts once
    assert inclusive["rank (policy.py)"] == 6
    assert own == {"rank (policy.py)": 5, "schedule (policy.py)": 3, "Py_DECREF (object.h)": 3,
                   "CPyDef_m___g (native.c)": 4}


def test_callees_split_a_function_by_direct_callee(tmp_path: Path) -> None:
    total, split = spy_summary.callees(_profile(tmp_path), "schedule")
    assert total == 15
    # the outermost `schedule` of the recursive sample: its callee is `rank`
    assert split == {"rank (policy.py)": 6, "<self>": 2}


def test_callees_look_through_wrappers_and_count_header_helpers_as_own(tmp_path: Path) -> None:
    _, split = spy_summary.callees(_profile(tmp_path), "main")
    assert split == {"CPyDef_m___f (native.c)": 7, "schedule (policy.py)": 8}
    _, split = spy_summary.callees(_profile(tmp_path), "CPyDef_m___f")
    assert split == {"<self>": 3, "CPyDef_m___g (native.c)": 4}
