"""Real GPU-cluster traces shipped with rackwise, ready to simulate.

>>> from rackwise import traces
>>> traces.names()
('itp_2021', 'philly_2017')
"""

from __future__ import annotations

from rackwise.traces.catalog import attribution, describe, load, names

__all__ = ["attribution", "describe", "load", "names"]
