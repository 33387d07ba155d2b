"""Where a profile's time went, by function: a py-spy raw profile summed per function.

    py-spy record -r 100 -f raw --subprocesses -o /tmp/hadar.txt -- \\
        python bench_policies.py speed --policies hadar --traces philly_2017 --first-n 20000
    python spy_summary.py /tmp/hadar.txt 12

Prints each function's share of the samples with its callees (inclusive) and
without (self), largest first; line numbers are dropped, so a function's
lines count together.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path


def summarise(path: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Total samples, and samples per function inclusive and self."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):  # a recursive function counts once per sample
            inclusive[frame] += n
    return total, inclusive, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy record -f raw output")
    parser.add_argument("top", type=int, nargs="?", default=15)
    args = parser.parse_args()
    total, inclusive, own = summarise(args.profile)
    print(f"{total} samples")
    for title, counts in (("inclusive", inclusive), ("self", own)):
        print(f"--- {title}")
        for frame, n in counts.most_common(args.top):
            print(f"{100 * n / total:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
