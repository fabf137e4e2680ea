"""Named local models: split models assembled once into the cache (atomic, sha256 checked) from
their parts' packages, a clear line when a part is missing or the sum differs; and the real
Qwen2.5-Coder-0.5B assembled from its six PyPI packages and served (needs its extra)."""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from combee_fast.config import LocalConfig
from combee_fast.endpoint.local import LocalServer
from combee_fast.endpoint.models import LOCAL_MODELS, LocalModel, local_model, model_file
from combee_fast.errors import ConfigError
from tests.local_models import DEFAULT, THREADS, installed

ROOT = Path(__file__).resolve().parents[2]

PARTS = [b"GGUF" + bytes(range(256)) * 40, bytes(reversed(range(256))) * 33, b"tail" * 1000]


def _installed_parts(folder: Path, monkeypatch: pytest.MonkeyPatch, prefix: str) -> LocalModel:
    """Three part packages ``<prefix>1..3`` on the import path, each holding ``data/partNN.bin``,
    and the model they assemble to."""
    for number, data in enumerate(PARTS, start=1):
        package = folder / f"{prefix}{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    whole = b"".join(PARTS)
    return LocalModel("tiny", "tiny-instruct", "tiny-extra", "tiny.gguf", tuple(f"{prefix}{n}" for n in (1, 2, 3)),
                      size=len(whole), sha256=hashlib.sha256(whole).hexdigest())


def test_parts_are_assembled_once_into_the_cache_and_taken_from_there_after(tmp_path, monkeypatch) -> None:
    model = _installed_parts(tmp_path / "site", monkeypatch, "tiny_once_part")
    cache = tmp_path / "cache"
    path = model_file(model, cache=cache)
    assert path == cache / "tiny.gguf" and path.read_bytes() == b"".join(PARTS)
    assert (cache / "tiny.gguf.sha256").read_text().strip() == model.sha256
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.sha256"]  # no temporary file left
    made = path.stat().st_mtime_ns
    assert model_file(model, cache=cache) == path and path.stat().st_mtime_ns == made  # not assembled again
    path.write_bytes(b"GGUF cut short")  # a file that is not the checked one is assembled anew
    assert model_file(model, cache=cache).read_bytes() == b"".join(PARTS)


def test_a_missing_part_is_one_line_naming_it_and_its_extra(tmp_path, monkeypatch) -> None:
    model = _installed_parts(tmp_path / "site", monkeypatch, "tiny_missing_part")
    (tmp_path / "site" / "tiny_missing_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(ConfigError, match=r"^--local tiny: part 2 of 3 \(tiny_missing_part2\) is not installed: "
                                          r"pip install -e '\.\[tiny-extra\]'$"):
        model_file(model, cache=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_parts_whose_sum_differs_are_refused_and_leave_nothing_behind(tmp_path, monkeypatch) -> None:
    model = _installed_parts(tmp_path / "site", monkeypatch, "tiny_sum_part")
    wrong = LocalModel(model.name, model.alias, model.extra, model.file, model.packages, size=model.size,
                       sha256="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError) as refused:
        model_file(wrong, cache=cache)
    line = str(refused.value)
    assert "\n" not in line and model.sha256 in line and "0" * 64 in line and "--force-reinstall" in line
    assert not any(cache.iterdir())


def test_an_unknown_name_lists_the_models_and_the_cli_refuses_it_in_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no such model; choose smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"):
        local_model("llama-70b")
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--local", "llama-70b"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid choice: 'llama-70b'" in done.stderr and "Traceback" not in done.stderr


def test_each_model_has_an_extra_pinning_its_packages_and_the_local_extra_brings_the_default() -> None:
    """The remedy of a missing part names an extra that installs it (the server and the model's
    packages, nothing more), and ``pip install -e '.[local]'`` (README command 2, ``.ci/run``) brings
    the server and the model ``--local`` starts by default, and no other model (SmolLM2's package
    has pip build llama-cpp-python from source)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["local"] == [f"combee_fast[server,{DEFAULT.extra}]"]
    for model in LOCAL_MODELS.values():
        pinned = {requirement.split("==")[0].replace("-", "_") for requirement in extras[model.extra]}
        assert pinned == {"combee_fast[server]", *model.packages}, (model.name, extras[model.extra])


QWEN = LOCAL_MODELS["qwen2.5-coder-0.5b"]
HAVE_QWEN = installed(QWEN)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(not HAVE_QWEN, reason="the 'qwen-coder-0-5b' extra is not installed "
                                          "(pip install -e '.[qwen-coder-0-5b]')")
async def test_the_real_qwen_05b_is_assembled_from_its_six_packages_and_answers_on_the_local_server(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COMBEE_MODEL_CACHE", str(tmp_path / "models"))
    path = model_file(QWEN)
    with path.open("rb") as gguf:
        header = gguf.read(1 << 16)
    assert header[:4] == b"GGUF" and b"Qwen2.5 Coder 0.5B Instruct AWQ" in header
    assert os.path.getsize(path) == 491_400_064
    async with LocalServer(LocalConfig(name="qwen2.5-coder-0.5b", prefer_native=False, threads=THREADS)) as server:
        assert server.model == path and server.alias == "qwen2.5-coder-0.5b-instruct"
        assert server.self_test_s is not None and server.self_test_s > 0
