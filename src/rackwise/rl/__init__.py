"""Training the MARL scheduler (``rackwise train-marl``; the ``rl`` extra).

The policy's run-time parts (features, the hierarchical GNN, checkpoints,
the interference model) live with the policy in
`rackwise.policies.parts.marl`; this package is the application that
trains them: a scheduling core that drives the simulator
(`core`), gymnasium and PettingZoo environments over it (`envs`), episode
sampling from traces (`episodes`), and MAPPO (`mappo`, `curves`). It
depends on the policies and the simulator; nothing below depends on it.
"""
