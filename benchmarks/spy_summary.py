"""Where a profile's time went, by function: a py-spy raw profile (or a `perf` one, collapsed) summed per function.

    py-spy record -r 100 -f raw --subprocesses -o /tmp/hadar.txt -- \\
        python bench_policies.py speed --policies hadar --traces philly_2017 --first-n 20000
    python spy_summary.py /tmp/hadar.txt 12
    python spy_summary.py /tmp/hadar.txt 12 --under HadarPlanner._plan

Prints each function's share of the samples with its callees (inclusive) and
without (self), largest first; line numbers are dropped, so a function's
lines count together.

``--under NAME`` splits the samples of the outermost function whose name
starts with NAME by the function it calls directly (``<self>``: none). In a
profile of the compiled build (``py-spy record --native``) a compiled
function is ``CPyDef_<module>___<Class>___<method>``, called from Python
through a wrapper ``CPyPy_...``, and inline helpers in C headers (the
reference counts of ``object.h``, say) show as frames; the wrappers are
looked through and the helpers counted as their caller's own work, as are
the functions a `perf` profile marks inlined (``perf_collapse.py``).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# A native frame in a header (reference counts, tuple slots) or inlined: the caller's own work.
_INLINE = re.compile(r"\((\S+\.h|inlined)\)$")


def _samples(path: Path) -> list[tuple[list[str], int]]:
    """Each stack (outermost frame first, line numbers dropped) with its sample count."""
    out = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        out.append(([re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")], int(count)))
    return out


def summarise(path: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Total samples, and samples per function inclusive and self."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for frames, n in _samples(path):
        total += n
        own[frames[-1]] += n
        for frame in set(frames):  # a recursive function counts once per sample
            inclusive[frame] += n
    return total, inclusive, own


def callees(path: Path, name: str) -> tuple[int, Counter[str]]:
    """Total samples, and the samples of the outermost frame named ``name...`` by its direct callee."""
    split: Counter[str] = Counter()
    total = 0
    for frames, n in _samples(path):
        total += n
        at = next((i for i, frame in enumerate(frames) if frame.startswith(name)), None)
        if at is None:
            continue
        below = [frame for frame in frames[at + 1:]
                 if not frame.startswith("CPyPy_") and not _INLINE.search(frame)]
        split[below[0] if below else "<self>"] += n
    return total, split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy record -f raw output, or perf_collapse.py's")
    parser.add_argument("top", type=int, nargs="?", default=15)
    parser.add_argument("--under", metavar="NAME", help="split this function's samples by direct callee")
    args = parser.parse_args()
    if args.under:
        total, split = callees(args.profile, args.under)
        print(f"{total} samples; {sum(split.values())} in {args.under}")
        for frame, n in split.most_common(args.top):
            print(f"{100 * n / total:5.1f}%  {frame}")
        return
    total, inclusive, own = summarise(args.profile)
    print(f"{total} samples")
    for title, counts in (("inclusive", inclusive), ("self", own)):
        print(f"--- {title}")
        for frame, n in counts.most_common(args.top):
            print(f"{100 * n / total:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
