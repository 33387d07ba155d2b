"""The optional compiled build: ``RACKWISE_COMPILE=1`` compiles the hot modules with mypyc.

Without it (the default) rackwise installs as plain Python. With it, the
modules below become C extensions, the same code and the same results
(the golden records tests hold for both builds), several times faster in
the loops that dominate a simulation. Compiling needs ``mypy`` (pinned in
the ``test`` extra) and a C compiler, and so a build without isolation:

    pip install "mypy==2.4.1" "setuptools>=68"
    RACKWISE_COMPILE=1 pip install --no-build-isolation .

Every class of a listed module carries ``@mypyc_attr(serializable=True,
allow_interpreted_subclasses=True)``: policies and simulators are pickled
mid-run (forecasts, snapshots), and mypyc gives a serializable class a
working constructor only when it is also open to subclasses. A module
whose functions a benchmark replaces to count calls stays uncompiled, or
the counts would read zero.
"""

import os

from setuptools import setup

COMPILED = [
    "src/rackwise/cluster/allocation.py",
    "src/rackwise/engine/checks.py",
    "src/rackwise/engine/view.py",
    "src/rackwise/perf/model.py",
    "src/rackwise/perf/placing.py",
    "src/rackwise/perf/running_index.py",
    "src/rackwise/policies/parts/class_sizes.py",
    "src/rackwise/policies/parts/hadar_planning.py",
    "src/rackwise/policies/parts/heterogeneity.py",
    "src/rackwise/policies/parts/ordering.py",
    "src/rackwise/policies/parts/placement.py",
    "src/rackwise/policies/parts/predicted_srpt.py",
    "src/rackwise/policies/parts/primal_dual.py",
    "src/rackwise/policies/parts/size_distribution.py",
    "src/rackwise/policies/parts/virtual_machine.py",
    "src/rackwise/sim/engine.py",
]

if os.environ.get("RACKWISE_COMPILE") == "1":
    from mypyc.build import mypycify

    # The project's mypy settings apply; a note on settings for modules not compiled is no error.
    setup(ext_modules=mypycify(["--no-warn-unused-configs", *COMPILED], opt_level="3"))
else:
    setup()
