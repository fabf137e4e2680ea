"""Which tests run one after another when the suite runs on several pytest-xdist workers.

The suite runs on ``-n auto`` workers (at most 4) with ``--dist loadgroup`` (pyproject's
``addopts``): a group's tests all run on one worker, in file order, and the tests of different
groups run at once. By default each test file is a group of its own (``tests/conftest.py``), so a
file's module fixtures are built once and its tests keep their order. The two groups below span
several files: their tests share something of the whole machine that two at once would fight over.
The local-model tests are not such a group: each runs its llama.cpp server on one CPU thread
(:data:`tests.local_models.THREADS`), so two run at once on two cores, one per worker.
"""

from __future__ import annotations

import pytest

RAY = pytest.mark.xdist_group("ray")
"""A test that starts a Ray cluster on this machine (its nodes' worker ports come from one range)
or counts the processes Ray started."""
