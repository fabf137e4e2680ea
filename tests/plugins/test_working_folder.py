"""The folder combee runs in is data, not code (issue 53): a module there never shadows an
installed one, a plug-in there still loads by its path, a plug-in calling sys.exit() while it is
imported is one line and exit 2, and the local server's interpreter does not read that folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from combee_fast.config import LocalConfig
from combee_fast.endpoint.local import server_command

CHECK = """
import os, sys
from combee_fast.plugins import load_path
here = os.getcwd()
load_path("combee_fast.ace.kind:ACE", what="learner")
print("built-in", here in sys.path)
print("plug-in", load_path("localmod:VALUE", what="learner"), sys.path.index(here) == len(sys.path) - 1)
import colorsys  # a module named like a file of the folder, imported after: the installed one
print("colorsys", colorsys.__file__ != os.path.join(here, "colorsys.py"))
"""


def test_a_module_of_the_working_folder_never_shadows_an_installed_one(tmp_path: Path) -> None:
    (folder := tmp_path / "data").mkdir()
    (folder / "localmod.py").write_text("VALUE = 7\n")
    (folder / "colorsys.py").write_text("raise SystemExit('the folder ran as code')\n")
    (script := tmp_path / "check.py").write_text(CHECK)
    done = subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["built-in False", "plug-in 7 True", "colorsys True"]


def test_a_plug_in_that_exits_while_imported_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "exiter.py").write_text("import sys\nsys.exit(0)\n")
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--learner", "exiter:Kind",
                           "--train-split", "train[0:4]", "--out", str(tmp_path / "run"), "--quiet"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    assert done.stderr.strip().splitlines() == [
        "combee learn: error: learner 'exiter:Kind': importing exiter called sys.exit(0)"]


def test_the_local_servers_interpreter_does_not_read_the_working_folder(tmp_path: Path) -> None:
    command = server_command(tmp_path / "m.gguf", "m", 8080, LocalConfig(), native=None)
    assert command[:4] == [sys.executable, "-P", "-m", "combee_fast.endpoint.llama_host"]
