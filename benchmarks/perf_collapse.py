"""A `perf` profile as `spy_summary.py` reads it: one line per distinct stack, outermost frame first.

    perf record -F 1000 --call-graph dwarf,32768 -o /tmp/asrpt.data -- \\
        python -c "import bench_policies as b; b.speed('asrpt', 'philly_2017', 20000)"
    perf script -i /tmp/asrpt.data | python perf_collapse.py > /tmp/asrpt.txt
    python spy_summary.py /tmp/asrpt.txt 12 --under CPyDef_predicted_srpt___PredictedSrpt____ranked

`perf` samples from the kernel, so it does not slow the compiled build down
as ``py-spy record --native`` does, which unwinds every sample itself; it
cannot name interpreted Python functions (Python 3.11 gives them no
symbols: they show as ``_PyEval_EvalFrameDefault``), so the two
profilers answer different questions. A frame is ``symbol (library)``, or
``symbol (inlined)`` for a function the compiler inlined into its caller.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import PurePath

# `perf script`'s frame line: address, symbol with its offset, then (library) or (inlined).
_FRAME = re.compile(r"^\s+[0-9a-f]+\s+(?P<symbol>.+?)(?:\+0x[0-9a-f]+)?\s+\((?P<where>[^()]*)\)$")


def collapse(lines: Iterable[str]) -> Counter[str]:
    """Samples per stack (frames joined by ``;``, outermost first) of `perf script` text."""
    stacks: Counter[str] = Counter()
    frames: list[str] = []
    for line in lines:
        match = _FRAME.match(line)
        if match:
            where = match["where"]
            frames.append(f"{match['symbol']} ({where if where == 'inlined' else PurePath(where).name})")
        elif not line.strip() and frames:  # a blank line ends a sample
            stacks[";".join(reversed(frames))] += 1
            frames = []
    if frames:
        stacks[";".join(reversed(frames))] += 1
    return stacks


def main() -> None:
    for stack, n in collapse(sys.stdin).items():
        print(f"{stack} {n}")


if __name__ == "__main__":
    main()
