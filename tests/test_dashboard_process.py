"""`mcqaudit dashboard` as a process (docs/design.md §8, issue 17): SIGTERM, SIGINT and SIGHUP stop its
Streamlit server too, so nothing is left serving the port; a server that stops ends the command; a port in
use is refused before anything claims to start; `make dashboard PORT=N` and the links `reviews queue`
prints use the port given. Real processes, real ports on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import free_port

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux: /proc)."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited: only its parent's wait is missing


def wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Dashboard:
    """`mcqaudit dashboard DB --port P` in its own session (so a test's cleanup can stop the whole group)."""

    def __init__(self, db: Path, port: int, log: Path):
        self.port = port
        self.log_path = log
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcqaudit", "dashboard", str(db), "--port", str(port)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.server = 0

    def wait_serving(self) -> None:
        wait_for(lambda: listening(self.port) or self.proc.poll() is not None, 120, "the dashboard to listen")
        assert self.proc.poll() is None, self.log_path.read_text()
        kids = children(self.proc.pid)
        assert len(kids) == 1, kids  # the Streamlit server
        self.server = kids[0]

    def stop(self) -> None:
        if self.proc.poll() is None or alive(self.server):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            if self.server and alive(self.server):
                os.kill(self.server, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._log.close()


@pytest.fixture
def dashboard(ui_db: Path, tmp_path: Path) -> Iterator[Dashboard]:
    d = Dashboard(ui_db, free_port(), tmp_path / "dashboard.log")
    try:
        d.wait_serving()
        yield d
    finally:
        d.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_to_the_command_stops_its_server(dashboard: Dashboard, sig: signal.Signals) -> None:
    """`kill PID` of the command (not of its process group) takes the Streamlit server down with it."""
    os.kill(dashboard.proc.pid, sig)  # the command alone, as `kill PID` does
    assert dashboard.proc.wait(timeout=30) == 0
    wait_for(lambda: not alive(dashboard.server), 15, "the server to exit")
    assert not listening(dashboard.port), "a server is still serving the port"


def test_the_next_dashboard_on_the_port_serves_after_a_kill(
    dashboard: Dashboard, ui_db: Path, tmp_path: Path
) -> None:
    os.kill(dashboard.proc.pid, signal.SIGTERM)
    dashboard.proc.wait(timeout=30)
    wait_for(lambda: not alive(dashboard.server), 15, "the server to exit")
    nxt = Dashboard(ui_db, dashboard.port, tmp_path / "next.log")
    try:
        nxt.wait_serving()
        assert "is not available" not in nxt.log_path.read_text()
    finally:
        nxt.stop()


def test_a_sigkilled_command_leaves_no_server(dashboard: Dashboard) -> None:
    """Even SIGKILL, which the command cannot catch: Linux tells the server its parent died."""
    os.kill(dashboard.proc.pid, signal.SIGKILL)
    dashboard.proc.wait(timeout=30)
    wait_for(lambda: not alive(dashboard.server), 15, "the server to exit")
    wait_for(lambda: not listening(dashboard.port), 15, "the port to be free")


def test_when_the_server_dies_the_command_exits(dashboard: Dashboard) -> None:
    os.kill(dashboard.server, signal.SIGKILL)
    assert dashboard.proc.wait(timeout=30) == 128 + signal.SIGKILL
    assert "the dashboard server stopped (exit status 137)" in dashboard.log_path.read_text()


def test_a_port_in_use_is_refused_before_claiming_to_start(ui_db: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "mcqaudit", "dashboard", str(ui_db), "--port", str(port)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert f"error: port {port} on 127.0.0.1 is in use" in proc.stderr and "--port" in proc.stderr
    assert "mcqaudit dashboard on http" not in proc.stderr + proc.stdout  # nothing claimed to start
    assert "Traceback" not in proc.stderr and time.monotonic() - started < 60


def mcqaudit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "MCQAUDIT_DASHBOARD_PORT"}
    return subprocess.run(
        [sys.executable, "-m", "mcqaudit", *args], cwd=ROOT, env={**full, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_queue_links_use_the_port_given(ui_db: Path) -> None:
    out = mcqaudit("reviews", "queue", "--db", str(ui_db), "--size", "4", "--port", "8704")
    assert out.returncode == 0, out.stderr
    qid = json.loads(mcqaudit("reviews", "queues", "--db", str(ui_db), "--json").stdout)[-1]["queue_id"]
    assert (
        f"mcqaudit dashboard {ui_db} --port 8704  then  http://127.0.0.1:8704/review?queue={qid}"
        in out.stdout
    )
    assert "8501" not in out.stdout
    listed = mcqaudit(
        "reviews", "queues", "--db", str(ui_db), "--json", env={"MCQAUDIT_DASHBOARD_PORT": "8705"}
    )
    assert json.loads(listed.stdout)[-1]["url"] == f"http://127.0.0.1:8705/review?queue={qid}"
    default = mcqaudit("reviews", "queues", "--db", str(ui_db))
    assert f"mcqaudit dashboard {ui_db}  then  http://127.0.0.1:8501/review?queue=ID" in default.stdout
    bad = mcqaudit("reviews", "queues", "--db", str(ui_db), "--port", "70000")
    assert bad.returncode == 2 and "'--port'" in bad.stderr and "65535" in bad.stderr


def test_make_dashboard_serves_on_port(tmp_path: Path) -> None:
    """`make dashboard PORT=N` runs the dashboard command with --port N (make -n: print, run nothing)."""
    make = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "dashboard", "PORT=8704", f"VENV={tmp_path / 'venv'}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert make.returncode == 0, make.stderr
    assert f"{tmp_path / 'venv'}/bin/mcqaudit dashboard --port 8704" in make.stdout.splitlines()
    default = subprocess.run(["make", "-n", "-C", str(ROOT), "dashboard", f"VENV={tmp_path / 'venv'}"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert f"{tmp_path / 'venv'}/bin/mcqaudit dashboard --port 8501" in default.stdout.splitlines()
