"""Tools for testing code built on rackwise: `check_policy` runs the policy contract on any policy."""

from rackwise.testing.policy_checks import POLICY_CHECKS, PolicyCheckError, check_policy

__all__ = ["POLICY_CHECKS", "PolicyCheckError", "check_policy"]
