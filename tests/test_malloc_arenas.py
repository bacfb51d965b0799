"""The commands that run until stopped limit glibc's malloc arenas themselves; the others, and
an environment that sets MALLOC_ARENA_MAX, are left alone; elsewhere it is a no-op."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flowmem.cli.malloc_arenas import SERVER_ARENAS, limit_malloc_arenas
from tests.processes import READY_LIMIT

GLIBC = sys.platform.startswith("linux") and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")

# The command's server is replaced by 8 threads that allocate at once (each thread that
# allocates gets an arena of its own, up to the limit), then the arenas glibc reports.
PROBE = textwrap.dedent(
    """
    import ctypes, os, sys, tempfile, threading
    from pathlib import Path

    def arenas():
        libc = ctypes.CDLL(None)
        libc.fopen.restype = ctypes.c_void_p
        libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
        libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
        libc.fclose.argtypes = (ctypes.c_void_p,)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "malloc.xml")
            fp = libc.fopen(path.encode(), b"w")
            libc.malloc_info(0, fp)
            libc.fclose(fp)
            return Path(path).read_text().count("<heap nr=")

    def server(*args, **kwargs):
        barrier = threading.Barrier(8)

        def allocate():
            held = [bytearray(4096) for _ in range(100)]
            barrier.wait()  # all 8 alive at once: none reuses an arena another let go of

        threads = [threading.Thread(target=allocate) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("arenas", arenas(), flush=True)

    if sys.argv[1] == "--no-command":
        server()
    else:
        import importlib
        module, name = {"api": ("server.api", "run"), "dashboard": ("server.api", "run"),
                        "mcp": ("server.mcp", "run_stdio"), "serve": ("flows.serve", "serve")}[sys.argv[1]]
        setattr(importlib.import_module(f"flowmem.{module}"), name, server)
        from flowmem.cli import main

        sys.argv = ["flowmem", *sys.argv[1:]]
        main()
    """
)


def _arenas(*args: str, **env: str) -> int:
    environ = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "PREFECT_API_URL")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=environ | env,
        capture_output=True,
        text=True,
        timeout=READY_LIMIT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return next(int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("arenas "))


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc arenas: Linux with glibc only")
@pytest.mark.parametrize("command", ["api", "dashboard", "mcp", "serve"])
def test_long_running_commands_keep_four_malloc_arenas(tmp_path: Path, command: str) -> None:
    assert _arenas(command, FLOWMEM_DB=f"{tmp_path}/db") == SERVER_ARENAS == 4


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc arenas: Linux with glibc only")
def test_without_the_limit_each_thread_takes_an_arena_and_the_environment_decides() -> None:
    assert _arenas("--no-command") >= 8  # glibc's default: the spread the limit stops
    assert _arenas("api", MALLOC_ARENA_MAX="3") == 3  # set by hand: that choice stands


NO_OP = textwrap.dedent(
    """
    import ctypes, os, sys
    from flowmem.cli.malloc_arenas import limit_malloc_arenas

    def musl(name):
        raise ValueError(f"unrecognized configuration name {name!r}")

    class NoMallopt:
        def __init__(self, name):
            pass

        def __getattr__(self, name):
            raise AttributeError(name)

    results = []
    sys.platform = "darwin"
    results.append(limit_malloc_arenas())
    sys.platform, os.confstr = "linux", musl
    results.append(limit_malloc_arenas())
    os.confstr, ctypes.CDLL = (lambda name: "glibc 2.36"), NoMallopt
    results.append(limit_malloc_arenas())
    print(results)
    """
)


def test_the_limit_is_a_no_op_that_never_raises_off_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", NO_OP], env=env, capture_output=True, text=True, timeout=READY_LIMIT
    )
    assert (done.returncode, done.stdout.strip()) == (0, "[False, False, False]"), done.stderr
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")  # where it works, a choice already made stands
    assert limit_malloc_arenas() is False
