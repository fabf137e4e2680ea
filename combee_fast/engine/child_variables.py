"""What a child process we start inherits of our environment: an allow-list, never our secrets.

Every child the engine starts that runs code it does not need to trust with credentials (the
process executor's workers, MCP servers, the local model server) gets :func:`child_variables`:
the variables named in :data:`KEPT` and those starting with :data:`KEPT_PREFIX`, nothing else of
ours: no API key, no cloud credentials, no token the user exported. What a child needs beyond that
it is given by name (an MCP server's ``env``, over these).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
"""Variables a child keeps: where programs, the home folder, the locale, temporary files, the
Python environment, shared libraries and trusted certificates are, and which GPUs a model server
may use."""

KEPT_PREFIX = "COMBEE_"
"""A child keeps our own settings (``COMBEE_MODEL_CACHE``, ``COMBEE_STATE_DIR``...)."""


def child_variables(given: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: ours filtered by :data:`KEPT` and :data:`KEPT_PREFIX`, then
    ``given`` over it."""
    kept = {name: value for name, value in os.environ.items() if name in KEPT or name.startswith(KEPT_PREFIX)}
    return {**kept, **(given or {})}
