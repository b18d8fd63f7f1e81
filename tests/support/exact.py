"""Values compared exactly, by the driver's casts' tests and the Spark ones alike: a float
by its bits (NaN equal to NaN, -0.0 not to 0.0), a list element by element."""

from __future__ import annotations

import struct
from typing import Any


def bits(value: Any) -> Any:
    """value in a form that compares equal exactly when the values are the same."""
    if isinstance(value, float):
        return struct.pack("<d", value)
    if isinstance(value, list):
        return [bits(v) for v in value]
    return value
