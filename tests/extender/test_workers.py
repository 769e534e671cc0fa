"""``gpuopt serve --workers 2``: two processes answer at once, as one process answers."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")

from gpuopt.extender.workers import can_fork, spreads_connections
from tests.extender.conftest import cluster, node, pod, task

pytestmark = pytest.mark.skipif(
    not (can_fork() and sys.platform.startswith("linux")), reason="needs fork and /proc"
)
REPO = Path(__file__).resolve().parents[2]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


class Served:
    """A ``gpuopt serve`` subprocess and keep-alive connections to it."""

    def __init__(self, snapshot: Path, workers: int) -> None:
        self.port = _port()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        command = [sys.executable, "-m", "gpuopt.cli", "serve", "--snapshot", str(snapshot)]
        command += ["--port", str(self.port), "--workers", str(workers), "--quiet"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, self.process.communicate()[1].decode()
            try:
                self.request(self.connect(), "GET", "/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline, "the service did not start in 60 s"
                time.sleep(0.1)

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    @staticmethod
    def request(
        connection: http.client.HTTPConnection, method: str, path: str, body: Any = None
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        headers = {} if data is None else {"Content-Type": "application/json"}
        connection.request(method, path, body=data, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()

    def worker(self, connection: http.client.HTTPConnection) -> int:
        return int(json.loads(self.request(connection, "GET", "/healthz")[1])["worker"])

    def stop(self) -> tuple[int, str, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=30)
        return self.process.returncode, out.decode(), err.decode()


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    nodes = [node(f"n{i}", gpus=8) for i in range(12)]
    tasks = [task(f"t{k}", f"n{k % 12}", gpus=1 + k % 3) for k in range(24)]
    path = tmp_path / "snapshot.json"
    path.write_text(cluster(nodes, tasks).to_json(indent=None))
    return path


@pytest.fixture
def two(snapshot: Path) -> Iterator[Served]:
    served = Served(snapshot, workers=2)
    yield served
    served.stop()


def _bodies() -> list[tuple[str, dict[str, Any]]]:
    names = [f"n{i}" for i in range(12)]
    found: list[tuple[str, dict[str, Any]]] = []
    for k, gpus in enumerate([1, 2, 4, 8, 3, 6]):
        body = {"Pod": pod(f"p{k}", gpus=gpus, cpu=str(2 + k)), "NodeNames": names}
        found += [("/filter", body), ("/prioritize", body)]
    return found


def test_two_workers_answer_at_once_and_as_one_process(snapshot: Path, two: Served) -> None:
    bodies = _bodies()
    one = Served(snapshot, workers=1)
    try:
        connection = one.connect()
        expected = [one.request(connection, "POST", path, body) for path, body in bodies]
        assert one.worker(connection) == one.process.pid  # one process: the service itself
    finally:
        one.stop()
    assert all(status == 200 for status, _ in expected)
    assert any(json.loads(text).get("FailedNodes") for text in [expected[0][1], expected[6][1]])

    # keep-alive connections, each served by one worker: both workers, children of the service
    connections = [two.connect() for _ in range(32)]
    by_worker: dict[int, list[http.client.HTTPConnection]] = {}
    for connection in connections:
        by_worker.setdefault(two.worker(connection), []).append(connection)
    assert len(by_worker) == 2
    assert {_parent(pid) for pid in by_worker} == {two.process.pid}
    if spreads_connections():  # one socket per worker: the kernel spreads the connections
        assert min(len(held) for held in by_worker.values()) >= 4
    (first, held), (second, others) = sorted(by_worker.items())

    # worker `first` stopped mid-request: its request waits while the other answers everything
    os.kill(first, signal.SIGSTOP)
    try:
        path, body = bodies[0]
        held[0].request("POST", path, body=json.dumps(body).encode())
        answered = [
            two.request(others[k % len(others)], "POST", path, body)
            for k, (path, body) in enumerate(bodies)
        ]
        assert two.worker(others[0]) == second
    finally:
        os.kill(first, signal.SIGCONT)
    late = held[0].getresponse()
    assert (late.status, late.read()) == expected[0]
    assert answered == expected  # byte for byte, as one process answers
    # and the first worker answers the rest as well
    assert [two.request(held[0], "POST", path, body) for path, body in bodies] == expected


def test_a_worker_that_dies_is_replaced_and_sigterm_stops_all(two: Served) -> None:
    connection = two.connect()
    workers = {two.worker(two.connect()) for _ in range(16)}
    victim = two.worker(connection)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:
        seen = {two.worker(two.connect()) for _ in range(16)}
        if victim not in seen and len(seen) == 2:
            break
        assert time.monotonic() < deadline, f"no new worker in 30 s (seen {seen})"
        time.sleep(0.2)
    assert len(seen - workers) == 1
    code, out, err = two.stop()
    assert code == 0 and out == ""
    assert "exited with status -9; starting another" in err
    for pid in seen:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_workers_flag_is_checked(snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuopt.cli import main

    assert main(["serve", "--snapshot", str(snapshot), "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve", "--snapshot", str(snapshot), "--port", str(port), "--workers", "2"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().startswith(f"gpuopt: error: --port: cannot listen on 127.0.0.1:{port}")
    assert err.count("\n") == 1
    # an address this machine does not have (TEST-NET-3) is --host's fault, not --port's
    code = main(["serve", "--snapshot", str(snapshot), "--host", "203.0.113.7", "--port", "8999"])
    assert code == 2
    assert capsys.readouterr().err.startswith("gpuopt: error: --host: cannot listen on 203.0.113.7")
