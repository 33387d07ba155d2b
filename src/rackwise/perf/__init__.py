"""How fast jobs run where they are placed.

`base.PerfModel` is the seam engines call; `base.IdealPerf` runs every job at
its trace speed; `model.NetworkPerf` adds GPU types, network topology and
congestion, interference and checkpoint cost (see ``docs/perf-model.md``).
Submodules are imported on use, so ``import rackwise.perf`` stays cheap.
"""

from __future__ import annotations
