"""The ``engine`` fixture: each test that asks for it runs once per engine
(tests/support/engines.py)."""

from __future__ import annotations

import pytest

from cdc.engines.planner import FORCEABLE
from tests.support.engines import Engine, make


@pytest.fixture(params=FORCEABLE)
def engine(request: pytest.FixtureRequest) -> Engine:
    """The Arrow engine, Spark's, and the Arrow fold written by Spark, behind one interface;
    the shared Spark session is started only when the engine needs it (the Arrow fold does
    not)."""
    return make(request.param, lambda: request.getfixturevalue("spark"))
