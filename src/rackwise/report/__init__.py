"""HTML reports of simulation results (needs the ``report`` extra: matplotlib).

``load`` finds results folders and reads them, ``groups`` groups runs by
policy and seed, ``stats`` and ``series`` reduce them to figures and plot
data, ``plots`` draws, ``html`` lays out the page, and ``build`` ties these
together: ``from rackwise.report.build import build_report``. Nothing here
imports matplotlib until ``plots`` (or ``build``) is imported.
"""
