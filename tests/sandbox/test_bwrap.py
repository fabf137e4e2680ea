"""The bubblewrap sandbox holds hostile commands: each hits its wall, is named by its own kind,
and leaves the host as it was (real bwrap sessions, real processes, a real loopback server)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from aiohttp import web

from combee_fast.config import SandboxConfig
from combee_fast.errors import SandboxError
from combee_fast.sandbox.limits import live_processes
from combee_fast.sandbox.scratch import scratch_folder
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.sandbox.state import SetupFile, state_from_tar

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")

LIMITS = SandboxConfig(cpu_s=2, memory_mb=256, max_processes=24, file_mb=1, output_kb=8, disk_mb=4, uid_base=62000,
                       warm=0)  # each test's sandbox started when it asks for it; warm pools: test_warm_pools_*


def _sandboxes(**changes: object) -> Sandboxes:
    config = SandboxConfig(**{**{f: getattr(LIMITS, f) for f in LIMITS.__struct_fields__}, **changes})
    return Sandboxes(config, step_timeout_s=2.0, uid_count=2)


async def _run(commands: list[str], files: list[SetupFile] = ()) -> list:  # type: ignore[assignment]
    sandboxes = _sandboxes()
    session = await sandboxes.open(list(files))
    try:
        return [await session.run(command, timeout_s=sandboxes.step_timeout_s) for command in commands]
    finally:
        await session.close()


def _sandbox_folders() -> set[str]:
    """The sandbox folders of this process (other processes of the machine make their own meanwhile)."""
    return {p.name for p in Path(scratch_folder() or tempfile.gettempdir()).glob(f"combee-sandbox-{os.getpid()}-*")}


async def test_a_command_sees_its_files_and_writes_only_its_working_directory() -> None:
    before = _sandbox_folders()
    sandboxes = _sandboxes()
    session = await sandboxes.open([SetupFile("in/nums.txt", b"10\n9\n"), SetupFile("run.sh", b"echo hi\n", 0o755, 3600)])
    try:
        listing = await session.run("ls -l in run.sh; sort -n in/nums.txt > out.txt; ./run.sh", timeout_s=2)
        state = await session.final_state()
    finally:
        await session.close()
    assert listing.exit_code == 0 and listing.kind is None and "hi" in listing.output
    assert state.files["out.txt"] == b"9\n10\n" and state.modes["run.sh"] & 0o100
    assert _sandbox_folders() == before  # its host-side folder is gone


async def test_a_fork_bomb_hits_the_process_limit_and_leaves_no_process() -> None:
    uid = LIMITS.uid_base
    results = await _run(["bomb() { bomb | bomb & }; bomb", "sleep 1; echo still here"])
    assert "process_limit" in {r.kind for r in results}
    assert live_processes(uid) == 0 and live_processes(uid + 1) == 0  # closed: every one of them is gone


@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox's processes are told apart by its own uid under root only")
async def test_a_fork_bomb_left_running_that_hit_the_limit_and_died_out_is_reported_with_the_next_command() -> None:
    # the command returns at once, its bomb starting two seconds later in the background: it hit no
    # wall; the bomb then forks until it cannot and dies out while no command runs (its processes are
    # gone); what it printed then comes with the next command's result, which names the wall
    sandboxes = _sandboxes()
    session = await sandboxes.open([])
    try:
        uid = session._uid  # type: ignore[attr-defined]
        begun = time.monotonic()
        started = await session.run("bomb() { bomb | bomb & }; (sleep 2; bomb) &", timeout_s=2)
        deadline, quiet_since = time.monotonic() + 30, None
        while time.monotonic() < deadline:  # until only bwrap, its init and the runner are left, for a second
            if live_processes(uid) > 3:  # (a count from /proc can miss a churning bomb once, not for a second)
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > 1 and time.monotonic() > begun + 3:
                break
            await asyncio.sleep(0.01)
        died_out = quiet_since is not None and live_processes(uid) <= 3
        after = await session.run("echo next", timeout_s=2)
    finally:
        await session.close()
    assert started.kind is None and started.exit_code == 0 and started.output == ""
    assert died_out
    assert after.kind == "process_limit" and after.exit_code == 0 and "Cannot fork" in after.output


async def test_filling_the_disk_stops_at_the_working_directory_size() -> None:
    """The 7.2 MB written stop at the 4 MB disk, and none of it reaches the host: the session's
    host folder (the one path the host shares with it) holds under 2 MB. (The host's free space
    is no measure: the suite's other worker writes to the same disk meanwhile.)"""
    sandboxes, before = _sandboxes(), _sandbox_folders()
    session = await sandboxes.open([])
    try:
        results = [await session.run(command, timeout_s=sandboxes.step_timeout_s)
                   for command in ("for i in 1 2 3 4 5 6 7 8; do head -c 900K /dev/zero > f$i || exit 1; done",
                                   "rm -f f*; head -c 2M /dev/zero > big")]
        root = Path(scratch_folder() or tempfile.gettempdir())
        folders = [root / name for name in _sandbox_folders() - before]
        held = sum(f.stat().st_blocks * 512 for folder in folders for f in folder.rglob("*") if f.is_file())
    finally:
        await session.close()
    assert [r.kind for r in results] == ["disk_full", "file_too_large"]
    assert len(folders) == 1 and held < 2 << 20


async def test_sleeping_forever_is_killed_at_the_step_limit() -> None:
    results = await _run(["sleep 600", "echo next"])
    assert results[0].kind == "step_timeout" and results[0].seconds < 10
    assert results[1].output == "next\n"


async def test_printing_without_end_is_stopped_and_bounded() -> None:
    results = await _run(["yes", "echo next"])
    assert results[0].kind == "output_limit" and results[0].output_bytes <= LIMITS.file_mb << 20
    assert len(results[0].output) <= LIMITS.output_kb * 1024 and results[1].output == "next\n"


async def test_secrets_are_not_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-do-not-leak-1234")
    results = await _run(["cat /etc/shadow", "env; printenv OPENAI_API_KEY", "ls /root /home"])
    assert results[0].kind == "hidden_path"
    assert "sk-test-do-not-leak" not in results[1].output and "OPENAI" not in results[1].output
    assert results[2].kind == "hidden_path"


async def test_no_network_reaches_the_host() -> None:
    seen: list[str] = []

    async def handle(request: web.BaseRequest) -> web.Response:
        seen.append(request.path)
        return web.Response(text="reached")

    runner = web.ServerRunner(web.Server(handle))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        results = await _run([f"python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:{port}/\", "
                              "timeout=2).read())'",
                              "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)'"])
    finally:
        await runner.cleanup()
    assert [r.kind for r in results] == ["network_denied", "network_denied"] and not seen


async def test_writing_outside_the_working_directory_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    results = await _run(["echo x > /usr/escape.txt", f"echo x > {target}", "echo x > /root/escape.txt"])
    assert results[0].kind == "write_denied" and results[2].kind == "hidden_path"
    assert not target.exists() and not Path("/usr/escape.txt").exists() and not Path("/root/escape.txt").exists()


async def test_memory_and_cpu_limits() -> None:
    results = await _run(["python3 -c 'x = bytearray(512 * 1024 * 1024)'", "while :; do :; done"])
    assert results[0].kind == "memory_limit"
    assert results[1].kind in ("cpu_limit", "step_timeout")


async def test_a_state_stream_leaving_the_working_directory_is_refused() -> None:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(SandboxError, match="not inside the working directory"):
        state_from_tar(buffer.getvalue())


async def test_a_link_planted_in_the_working_directory_is_not_followed() -> None:
    sandboxes = _sandboxes()
    session = await sandboxes.open([])
    try:
        await session.run("ln -s /etc/hostname out.txt; ln -s / root", timeout_s=2)
        state = await session.final_state()
    finally:
        await session.close()
    assert state.links == {"out.txt": "/etc/hostname", "root": "/"} and not state.files


async def test_an_unreadable_file_in_the_working_directory_is_named_as_such_not_as_a_large_state() -> None:
    sandboxes = _sandboxes()
    session = await sandboxes.open([])
    try:
        await session.run("echo secret > locked.txt; chmod 000 locked.txt", timeout_s=2)
        with pytest.raises(SandboxError) as failed:
            await session.final_state()
    finally:
        await session.close()
    message = str(failed.value)
    assert message.startswith("the working directory could not be archived (tar: ")
    assert "locked.txt" in message and "Permission denied" in message and "bytes" not in message


async def test_trusted_mode_runs_plain_processes_in_a_scratch_folder() -> None:
    sandboxes = _sandboxes(mode="none")
    session = await sandboxes.open([SetupFile("a.txt", b"b\na\n")])
    try:
        result = await session.run("sort a.txt > b.txt; sleep 5", timeout_s=1)
        state = await session.final_state()
    finally:
        await session.close()
    assert result.kind == "step_timeout" and state.files["b.txt"] == b"a\nb\n"


async def test_warm_pools_give_each_episode_a_fresh_sandbox_and_leave_nothing_when_closed() -> None:
    before = _sandbox_folders()
    async with _sandboxes(warm=1) as sandboxes:
        seen = []
        for _ in range(3):
            session = await sandboxes.open([SetupFile("a.txt", b"first\n")])
            try:
                seen.append(await session.run("cat a.txt; ls; echo again >> a.txt; echo $$", timeout_s=2))
            finally:
                await session.close()
        assert len(_sandbox_folders() - before) == 1  # the warm one, waiting for the next episode
    assert [r.output.splitlines()[:2] for r in seen] == [["first", "a.txt"]] * 3  # nothing carried over
    assert _sandbox_folders() == before
    assert not live_processes(LIMITS.uid_base) and not live_processes(LIMITS.uid_base + 1)


@pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes run as uids of their own under root only")
async def test_two_runs_at_once_share_no_uid_and_a_fork_bomb_touches_nothing_it_did_not_start() -> None:
    base = 62300
    bystander = subprocess.Popen(["setpriv", f"--reuid={base}", f"--regid={base}", "--clear-groups", "sleep", "60"])
    try:
        deadline = time.monotonic() + 5
        while not live_processes(base) and time.monotonic() < deadline:  # a host process running as uid_base
            await asyncio.sleep(0.01)
        first, second = _sandboxes(uid_base=base), _sandboxes(uid_base=base)  # two runs, one configuration
        sleeper = await second.open([])
        try:
            bomber = await first.open([])
            try:
                uids = {bomber._uid, sleeper._uid}  # type: ignore[attr-defined]
                waiting = asyncio.ensure_future(sleeper.run("sleep 3; echo still here", timeout_s=8))
                bombed = await bomber.run("bomb() { bomb | bomb & }; bomb; sleep 2", timeout_s=2)
            finally:
                await bomber.close()  # the bomber's run cleans up after its fork bomb
            slept = await waiting
        finally:
            await sleeper.close()
        assert bombed.kind in ("process_limit", "step_timeout")  # it forked until it could not, or was stopped
        assert len(uids) == 2 and base not in uids  # its own uid each, never the host process's
        assert slept.exit_code == 0 and slept.output == "still here\n"  # the other run's episode is untouched
        assert bystander.poll() is None  # and so is the host's process
    finally:
        bystander.kill()
        bystander.wait()


async def test_no_way_around_the_disk_and_memory_limits() -> None:
    shm = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
           "print('shmget', libc.shmget(0, 64 << 20, 0o1000 | 0o600), ctypes.get_errno())")
    results = await _run(["echo x > /escape.txt", "echo x > /dev/escape.txt",
                          "for i in 1 2 3 4 5 6; do head -c 900K /dev/zero > /dev/shm/f$i || exit 1; done",
                          "unshare -U -r sh -c 'mount -t tmpfs none /work && echo mounted'", f'python3 -c "{shm}"'])
    root, dev, shm_full, nested, sysv = results
    assert root.kind == dev.kind == "write_denied" and "Read-only file system" in root.output + dev.output
    assert shm_full.kind == "disk_full"  # /dev/shm holds at most disk_mb, like the working directory
    assert nested.exit_code != 0 and "mounted" not in nested.output  # no user namespace, so no mount of its own
    assert sysv.output.strip() == "shmget -1 1"  # System V shared memory is refused (EPERM)
