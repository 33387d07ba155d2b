"""benchmarks/perf_collapse.py: `perf script` text as the stacks `spy_summary.py` reads."""

from __future__ import annotations

from pathlib import Path

from tests.benchmark_scripts import load_script

perf_collapse = load_script("perf_collapse")
spy_summary = load_script("spy_summary")

# Two samples of one stack and one of another, innermost frame first, as `perf script` prints them.
PERF_SCRIPT = """\
python 21873 31549.738220:     250000 cpu-clock:pppH:
\t        3f1a2 Py_DECREF+0x12 (inlined)
\t        3f1a2 CPyDef_m___f+0x40 (/venv/lib/python3.11/site-packages/abc__mypyc.cpython-311.so)
\t        5e000 _PyEval_EvalFrameDefault+0x1a0 (/usr/lib/libpython3.11.so.1.0)

python 21873 31549.738464:     250000 cpu-clock:pppH:
\t        3f1b0 CPyDef_m___g+0x8 (/venv/lib/python3.11/site-packages/abc__mypyc.cpython-311.so)
\t        3f1a2 CPyDef_m___f+0x48 (/venv/lib/python3.11/site-packages/abc__mypyc.cpython-311.so)
\t        5e000 _PyEval_EvalFrameDefault+0x1a0 (/usr/lib/libpython3.11.so.1.0)

python 21873 31549.738717:     250000 cpu-clock:pppH:
\t        3f1b0 CPyDef_m___g+0x10 (/venv/lib/python3.11/site-packages/abc__mypyc.cpython-311.so)
\t        3f1a2 CPyDef_m___f+0x48 (/venv/lib/python3.11/site-packages/abc__mypyc.cpython-311.so)
\t        5e000 _PyEval_EvalFrameDefault+0x1a0 (/usr/lib/libpython3.11.so.1.0)
"""


def test_stacks_are_outermost_first_with_their_library_or_inlined() -> None:
    stacks = perf_collapse.collapse(PERF_SCRIPT.splitlines())
    lib, so = "libpython3.11.so.1.0", "abc__mypyc.cpython-311.so"
    assert stacks == {
        f"_PyEval_EvalFrameDefault ({lib});CPyDef_m___f ({so});Py_DECREF (inlined)": 1,
        f"_PyEval_EvalFrameDefault ({lib});CPyDef_m___f ({so});CPyDef_m___g ({so})": 2,
    }


def test_the_summary_counts_inlined_frames_as_their_callers_own(tmp_path: Path) -> None:
    path = tmp_path / "profile.txt"
    stacks = perf_collapse.collapse(PERF_SCRIPT.splitlines())
    path.write_text("".join(f"{stack} {n}\n" for stack, n in stacks.items()))
    total, split = spy_summary.callees(path, "CPyDef_m___f")
    assert total == 3
    assert split == {"<self>": 1, "CPyDef_m___g (abc__mypyc.cpython-311.so)": 2}
