"""The optional compiled build: ``RACKWISE_COMPILE=1`` compiles the hot modules with mypyc.

Without it (the default) rackwise installs as plain Python. With it, the
modules below become C extensions, the same code and the same results
(the golden records tests hold for both builds), faster in the loops that
dominate a simulation. Compiling type-checks the code, so
it needs the dependencies and ``mypy`` (pinned in the ``test`` extra)
installed first, a C compiler, and a build without isolation (the README's
command; ``build/`` is cleared first, or a module dropped from the list
would be installed from an earlier build):

    pip install ".[test]" "setuptools>=68" && rm -rf build
    RACKWISE_COMPILE=1 pip install --no-build-isolation --no-deps --force-reinstall .

Every class of a listed module but its protocols, named tuples, enums and
errors carries ``@mypyc_attr(serializable=True,
allow_interpreted_subclasses=True)``, and each frozen dataclass among them
a ``__reduce__`` (``rackwise.frozen.pickled_by_constructor``;
``tests/test_build.py`` checks both): policies are pickled mid-run
(forecasts, snapshots), mypyc gives a serializable class a working
constructor only when it is also open to subclasses, and a compiled frozen
dataclass cannot be unpickled field by field. Compiled code
calls these modules' functions and methods directly, so the benchmarks and
tests that count calls by replacing them run on the plain-Python build only.
"""

import os

from setuptools import setup

COMPILED = [
    "src/rackwise/cluster/allocation.py",
    "src/rackwise/engine/checks.py",
    "src/rackwise/engine/hooks.py",
    "src/rackwise/engine/queue_order.py",
    "src/rackwise/engine/view.py",
    "src/rackwise/perf/base.py",
    "src/rackwise/perf/graph_placement.py",
    "src/rackwise/perf/model.py",
    "src/rackwise/perf/placed.py",
    "src/rackwise/perf/placing.py",
    "src/rackwise/perf/running_index.py",
    "src/rackwise/perf/views.py",
    "src/rackwise/policies/delay_tuner.py",
    "src/rackwise/policies/parts/class_sizes.py",
    "src/rackwise/policies/parts/delay_placement.py",
    "src/rackwise/policies/parts/delay_scheduling.py",
    "src/rackwise/policies/parts/delay_wakes.py",
    "src/rackwise/policies/parts/first_copies.py",
    "src/rackwise/policies/parts/forking.py",
    "src/rackwise/policies/parts/hadar_planning.py",
    "src/rackwise/policies/parts/heterogeneity.py",
    "src/rackwise/policies/parts/idle_copies.py",
    "src/rackwise/policies/parts/las_queues.py",
    "src/rackwise/policies/parts/locality.py",
    "src/rackwise/policies/parts/ordering.py",
    "src/rackwise/policies/parts/overrun_watch.py",
    "src/rackwise/policies/parts/placement.py",
    "src/rackwise/policies/parts/predicted_srpt.py",
    "src/rackwise/policies/parts/primal_dual.py",
    "src/rackwise/policies/parts/size_distribution.py",
    "src/rackwise/policies/parts/virtual_machine.py",
    "src/rackwise/sim/engine.py",
    "src/rackwise/sorted_ints.py",
    "src/rackwise/workload/state.py",
]

if os.environ.get("RACKWISE_COMPILE") == "1":
    from mypyc.build import mypycify

    # The project's mypy settings apply; a note on settings for modules not compiled is no error.
    extensions = mypycify(["--no-warn-unused-configs", *COMPILED], opt_level="3")
    if os.name != "nt":  # MSVC fuses no multiply-add unless asked to
        for extension in extensions:
            # GCC and clang may fuse ``a + b * c`` into one rounding where the target has FMA
            # (aarch64, say); Python rounds twice. Off, both builds give the same bits.
            extension.extra_compile_args = [*extension.extra_compile_args, "-ffp-contract=off"]
    setup(ext_modules=extensions)
else:
    setup()
