"""Forecasts: when each pending job will start and finish.

A `rackwise.engine.snapshot.ClusterSnapshot` describes one instant (from a simulation or a
real backend); `forward.forward` simulates on from it; `band.band` repeats
that with sampled durations for p10/p50/p90; `accuracy` measures the error
against what a simulation then did.
"""
