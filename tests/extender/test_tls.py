"""HTTPS and mutual TLS: a real uvicorn server built by ``gpuopt serve``'s own code path."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

trustme = pytest.importorskip("trustme")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from gpuopt.cli.app import build_parser  # noqa: E402
from gpuopt.cli.serve import build  # noqa: E402
from tests.extender.test_engine import cluster, node, pod  # noqa: E402


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("pki")
    ca, other_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    files = {
        "ca": folder / "ca.pem",
        "cert": folder / "server.pem",
        "key": folder / "server-key.pem",
    }
    ca.cert_pem.write_to_path(str(files["ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["cert"]))
    server.private_key_pem.write_to_path(str(files["key"]))
    return {"ca": ca, "other": other_ca, "files": files, "folder": folder}


@pytest.fixture(scope="module")
def mutual(pki: dict[str, Any]) -> Iterator[str]:
    """A running ``gpuopt serve --tls-cert --tls-key --tls-client-ca``; yields its base URL."""
    snapshot = pki["folder"] / "cluster.json"
    snapshot.write_text(cluster([node("a")]).to_json())
    files = pki["files"]
    port = _free_port()
    args = build_parser().parse_args(
        [
            "serve",
            "--snapshot", str(snapshot),
            "--port", str(port),
            "--tls-cert", str(files["cert"]),
            "--tls-key", str(files["key"]),
            "--tls-client-ca", str(files["ca"]),
            "--quiet",
        ]
    )  # fmt: skip
    app, options = build(args)
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # generous: a loaded machine starts slowly
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the TLS server did not start")
        time.sleep(0.05)
    yield f"https://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


def _context(pki: dict[str, Any], client_ca: Any | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    pki["ca"].configure_trust(context)
    if client_ca is not None:
        client_ca.issue_cert("kube-scheduler").configure_cert(context)
    return context


def test_a_client_the_ca_signed_is_served(pki: dict[str, Any], mutual: str) -> None:
    with httpx.Client(verify=_context(pki, pki["ca"]), timeout=30) as client:
        assert client.get(f"{mutual}/healthz").json()["status"] == "ok"
        found = client.post(f"{mutual}/filter", json={"Pod": pod(gpus=1), "NodeNames": ["a"]})
        assert found.status_code == 200 and found.json()["NodeNames"] == ["a"]


def _raw_get(mutual: str, context: ssl.SSLContext) -> bytes:
    """GET /healthz over a raw TLS socket: what the server sends back (b"": it closed)."""
    host, port = mutual.removeprefix("https://").split(":")
    with (
        socket.create_connection((host, int(port)), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return tls.recv(1024)


@pytest.mark.parametrize("who", ["no certificate", "another CA's certificate"])
def test_other_clients_are_refused_at_the_handshake(
    pki: dict[str, Any], mutual: str, who: str
) -> None:
    client_ca = None if who == "no certificate" else pki["other"]
    # the same raw request with a good certificate is answered (the control)
    assert _raw_get(mutual, _context(pki, pki["ca"])).startswith(b"HTTP/1.1 200")
    # TLS 1.2: the server checks the client's certificate inside the handshake
    old = _context(pki, client_ca)
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLError):
        _raw_get(mutual, old)
    # TLS 1.3: the client's side of the handshake ends before the server has checked its
    # certificate; the server then aborts it, and nothing is ever answered
    try:
        answer = _raw_get(mutual, _context(pki, client_ca))
    except (ssl.SSLError, ConnectionError):
        answer = b""
    assert answer == b""


def test_plain_http_to_the_tls_port_gets_no_answer(mutual: str) -> None:
    plain = mutual.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError), httpx.Client(timeout=30) as client:
        client.get(f"{plain}/healthz")


def test_tls_flags_are_checked_before_listening(pki: dict[str, Any], tmp_path: Path) -> None:
    from gpuopt.errors import ProblemError

    files = pki["files"]
    parse = build_parser().parse_args
    with pytest.raises(ProblemError, match="go together"):
        build(parse(["serve", "--tls-cert", str(files["cert"])]))
    with pytest.raises(ProblemError, match="mutual TLS is HTTPS"):
        build(parse(["serve", "--tls-client-ca", str(files["ca"])]))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ProblemError, match="TLS: the certificate"):
        build(parse(["serve", "--tls-cert", str(junk), "--tls-key", str(junk)]))
