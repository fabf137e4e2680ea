"""Which tests run one after another when the suite runs on several pytest-xdist workers.

The suite runs on ``-n auto`` workers (at most 4) with ``--dist loadgroup`` (pyproject's
``addopts``): a group's tests all run on one worker, in file order, and the tests of different
groups run at once. By default each test file is a group of its own (``tests/conftest.py``), so a
file's module fixtures are built once and its tests keep their order. The two groups below span
several files: their tests share something of the whole machine that two at once would fight over.
"""

from __future__ import annotations

import pytest

LOCAL_MODEL = pytest.mark.xdist_group("local_model")
"""A test that runs the local llama.cpp server on a real model: it takes both cores, so two at once
would each take twice as long and time out sooner."""

RAY = pytest.mark.xdist_group("ray")
"""A test that starts a Ray cluster on this machine (its nodes' worker ports come from one range)
or counts the processes Ray started."""
