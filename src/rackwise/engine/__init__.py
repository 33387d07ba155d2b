"""The engine contract: what the simulator and every live driver share.

- `contract`: `Decisions`, `Start`, the `Policy` protocol and its `Capabilities`.
- `checks`: `check_decisions`, the one all-or-nothing check of a decision.
- `hooks`: `notify`, the one order of policy callbacks at an instant.
- `seeding`: `run_generators`, the one way a seed becomes random generators.
- `snapshot`: `ClusterSnapshot`, one instant of a cluster (simulated or real),
  the input of forecasts.

Job state (`rackwise.workload.state.JobState`) and the cluster view
(`rackwise.engine.view.ClusterView`) sit below this package; the simulator
(`rackwise.sim`), the live drivers (`rackwise.backends`) and forecasts build
on it, and nothing here imports them.
"""

from rackwise.engine.checks import LIVE_CLUSTER, EngineSupport, check_decisions
from rackwise.engine.contract import NOTHING, Capabilities, Decisions, Policy, Start
from rackwise.engine.hooks import notify
from rackwise.engine.seeding import policy_rng, run_generators

__all__ = ["LIVE_CLUSTER", "NOTHING", "Capabilities", "Decisions", "EngineSupport", "Policy", "Start",
           "check_decisions", "notify", "policy_rng", "run_generators"]
