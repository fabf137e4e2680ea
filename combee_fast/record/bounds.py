"""The ranges a stored run's numbers must fall in, checked when a checkpoint (or anything else
kept in these types) is decoded: a forged or corrupted file cannot carry a negative count, an
infinite total or a score outside [0, 1] into a resumed run."""

from __future__ import annotations

from typing import Annotated

import msgspec

MAX_COUNT = 2 ** 53
"""The largest count or position a run may hold (exact as a float, and far past any run)."""

MAX_SECONDS = 1e12
"""The most seconds a run's totals may hold (some 30,000 years)."""

Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Seconds = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_SECONDS)]
Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
NonNegative = Annotated[float, msgspec.Meta(ge=0.0)]
