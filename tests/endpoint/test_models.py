"""Named local models: split models assembled once into the cache (atomic, sha256 checked) from
their parts' packages, a clear line when a part is missing or the sum differs; a cache that
trusts no one but its owner (a changed or planted file is checked by content, nothing is written
through a link, a folder others may write is refused, an unusable cache is named); and the real
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
    assert (cache / "tiny.gguf.sha256").read_text().split()[0] == model.sha256
    assert cache.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.sha256"]  # no temporary file left
    made = path.stat().st_mtime_ns
    assert model_file(model, cache=cache) == path and path.stat().st_mtime_ns == made  # not assembled again
    path.write_bytes(b"GGUF cut short")  # a file that is not the checked one is assembled anew
    assert model_file(model, cache=cache).read_bytes() == b"".join(PARTS)


def test_a_file_changed_since_its_check_is_checked_by_content_and_assembled_anew(tmp_path, monkeypatch) -> None:
    """A file of the right size beside the bare sum (the record an earlier version trusted) is not
    served: its content is checked, and it fails."""
    model = _installed_parts(tmp_path / "site", monkeypatch, "tiny_tampered_part")
    cache = tmp_path / "cache"
    path = model_file(model, cache=cache)
    whole = path.read_bytes()
    tampered = b"GGUF" + b"\x00" * (len(whole) - 4)
    path.write_bytes(tampered)
    (cache / "tiny.gguf.sha256").write_text(f"{model.sha256}\n")
    assert model_file(model, cache=cache).read_bytes() == whole
    (cache / "tiny.gguf.sha256").write_text(f"{model.sha256}\n")  # a bare sum beside the right content:
    assert model_file(model, cache=cache).read_bytes() == whole     # checked, and recorded again
    assert len((cache / "tiny.gguf.sha256").read_text().split()) == 4


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_a_file_planted_by_another_user_is_not_served(tmp_path, monkeypatch) -> None:
    model = _installed_parts(tmp_path / "site", monkeypatch, "tiny_planted_part")
    cache = tmp_path / "cache"
    path = model_file(model, cache=cache)
    whole = path.read_bytes()
    path.unlink()
    path.write_bytes(b"GGUF" + b"\x01" * (len(whole) - 4))
    os.chown(path, 4242, 4242)
    info = os.lstat(path)  # the record a planter would write for its file
    (cache / "tiny.gguf.sha256").write_text(f"{model.sha256} {info.st_size} {info.st_ino} {info.st_ctime_ns}\n")
    served = model_file(model, cache=cache)
    assert served.read_bytes() == whole and served.stat().st_uid == os.geteuid()


def test_nothing_is_written_through_a_link_planted_as_the_record(tmp_path, monkeypatch) -> None:
    model = _installed_parts(tmp_path / "site", monkeypatch, "tiny_linked_part")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n")
    (cache / "tiny.gguf.sha256").symlink_to(victim)
    model_file(model, cache=cache)
    assert victim.read_text() == "precious\n"
    assert not (cache / "tiny.gguf.sha256").is_symlink()


@pytest.mark.parametrize("make", ["writable_by_others", "a_link", "of_another_user"])
def test_a_cache_folder_others_control_is_refused_in_one_line(tmp_path, monkeypatch, make: str) -> None:
    model = _installed_parts(tmp_path / "site", monkeypatch, f"tiny_folder_{make}_part")
    cache = tmp_path / "cache"
    if make == "writable_by_others":
        cache.mkdir()
        cache.chmod(0o777)
        expected = r"may be written by others \(mode 777\): chmod go-w "
    elif make == "a_link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        cache.symlink_to(tmp_path / "elsewhere")
        expected = "is a link or not a folder"
    else:
        if os.geteuid() != 0:
            pytest.skip("making a folder of another user needs root")
        cache.mkdir(mode=0o700)
        os.chown(cache, 4242, 4242)
        expected = "belongs to uid 4242, not to you"
    with pytest.raises(ConfigError, match=f"^the model cache {cache} {expected}") as refused:
        model_file(model, cache=cache)
    assert "\n" not in str(refused.value) and not (cache / "tiny.gguf").exists()


def test_an_unusable_cache_is_one_line_naming_it(tmp_path, monkeypatch) -> None:
    model = _installed_parts(tmp_path / "site", monkeypatch, "tiny_unusable_part")
    (blocked := tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match=f"^the model cache {blocked / 'models'}: Not a directory; "):
        model_file(model, cache=blocked / "models")


def test_a_full_disk_is_one_line_naming_the_cache_and_leaves_nothing(tmp_path) -> None:
    """Writing the model fails as on a full disk (a file size limit of 1 kB: EFBIG), in a process
    of its own: ``combee learn --local`` says which folder, and leaves no temporary file."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    script = f"""
import resource, signal, sys
sys.path.insert(0, {str(ROOT)!r})
import pytest
from tests.endpoint.test_models import _installed_parts
from combee_fast.endpoint.models import model_file
from combee_fast.errors import ConfigError
model = _installed_parts(__import__("pathlib").Path({str(site)!r}), pytest.MonkeyPatch(), "tiny_full_part")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
try:
    model_file(model, cache=__import__("pathlib").Path({str(cache)!r}))
except ConfigError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"the model cache {cache}: File too large; free space there or set COMBEE_MODEL_CACHE " \
                          f"to a folder of yours\n"
    assert list(cache.iterdir()) == []


def test_the_cli_refuses_a_model_cache_others_may_write_before_starting_anything(tmp_path) -> None:
    (cache := tmp_path / "shared").mkdir()
    cache.chmod(0o777)
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--local", "--out", str(tmp_path / "run")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COMBEE_MODEL_CACHE": str(cache)})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(f"the model cache {cache} may be written by others (mode 777): "
                                                         f"chmod go-w {cache}, or set COMBEE_MODEL_CACHE to a folder "
                                                         f"of yours")
    assert "Traceback" not in done.stderr and list(cache.iterdir()) == []


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
