"""`report-builder serve` answers only to local names, holds no idle connection, serves no link (issue #30;
docs/guide/safety.md). In-process servers on 127.0.0.1 with short timeouts; the command line's own run is
`tests/test_fs_safety.py::test_serve_stays_inside_the_site`."""
from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from report_builder.site import serve


def _site(root: Path) -> Path:
    site = root / "site"
    (site / "figures" / "k21-fig1").mkdir(parents=True)
    (site / "index.html").write_text("<p>home</p>")
    (site / "figures" / "k21-fig1" / "data.csv").write_text("a\n1\n")
    (site / "figures" / "k21-fig1" / "index.html").write_text("<p>fig</p>")
    return site


@contextmanager
def _running(site: Path, **kw):
    server = serve.make_server(site, 0, **kw)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[0], server.server_address[1], server
    finally:
        server.shutdown()
        server.server_close()


def _get(host: str, port: int, path: str = "/", host_header: str | None = "", timeout: float = 10) -> tuple[int, bytes]:
    """(status, headers and body) of a raw HTTP/1.0 GET; ``host_header=None`` sends no Host line."""
    hdr = f"{host}:{port}" if host_header == "" else host_header
    lines = [f"GET {path} HTTP/1.0"] + ([f"Host: {hdr}"] if hdr is not None else []) + ["", ""]
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall("\r\n".join(lines).encode("latin-1"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_only_local_host_headers_are_answered(tmp_path):
    site = _site(tmp_path)
    with _running(site) as (host, port, _):
        assert host == "127.0.0.1"  # local by default
        for ok in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", "LOCALHOST."):
            assert _get(host, port, host_header=ok)[0] == 200, ok
        # DNS rebinding: a page of another site whose name now points here; variants with a port, a
        # local-looking prefix and a malformed header
        for bad in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", "localhost.evil.example:80",
                    "0.0.0.0", "10.0.0.1"):
            code, body = _get(host, port, host_header=bad)
            assert code == 421 and b"home" not in body, bad
        for malformed in ("[::1]x", "127.0.0.1:http", " "):
            code, body = _get(host, port, host_header=malformed)
            assert code == 400 and b"home" not in body, malformed
        assert _get(host, port, host_header=None)[0] == 400
    # a host bound explicitly is answered too (127.0.0.2 is loopback on Linux), other names still not
    try:
        ctx = _running(site, host="127.0.0.2")
        host, port, _ = ctx.__enter__()
    except OSError as e:
        pytest.skip(f"127.0.0.2 cannot be bound here ({e})")
    try:
        assert _get(host, port, host_header=f"127.0.0.2:{port}")[0] == 200
        assert _get(host, port, host_header="localhost")[0] == 200
        assert _get(host, port, host_header="evil.example")[0] == 421
    finally:
        ctx.__exit__(None, None, None)
    names, any_ip = serve.allowed_hosts("0.0.0.0")  # a wildcard bind: IP addresses and this machine's name
    assert any_ip and socket.gethostname().lower() in names and "evil.example" not in names


def test_idle_connections_are_closed_and_bounded(tmp_path):
    site = _site(tmp_path)
    with _running(site, idle_timeout=0.5, max_connections=2) as (host, port, _):
        before = threading.active_count()
        quiet = socket.create_connection((host, port), timeout=10)  # sends nothing at all
        half = socket.create_connection((host, port), timeout=10)
        half.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n")  # a request that stops arriving
        time.sleep(0.2)
        extra = socket.create_connection((host, port), timeout=10)  # over the limit: closed at once
        t0 = time.monotonic()
        assert extra.recv(100) == b""
        assert time.monotonic() - t0 < 5
        for s in (quiet, half):
            assert s.recv(100) == b""  # closed by the server after ~0.5 s, without an answer
            s.close()
        assert time.monotonic() - t0 < 8
        extra.close()
        deadline = time.monotonic() + 5
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before  # no thread left behind per idle connection
        assert _get(host, port)[0] == 200  # slots are free again


def test_no_link_hidden_file_special_file_or_listing_is_served(tmp_path):
    site = _site(tmp_path)
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "id_rsa").write_text("PRIVATE KEY")
    (site / ".env").write_text("TOKEN=1")
    (site / "figures" / "empty").mkdir()
    (site / "key.txt").symlink_to(outside / "id_rsa")
    (site / "env.txt").symlink_to(site / ".env")  # a link to a dotfile of the site itself
    (site / "figures" / "alias").symlink_to(site / "figures" / "k21-fig1", target_is_directory=True)
    (site / "copy.html").symlink_to("index.html")  # relative, inside the site
    os.mkfifo(site / "figures" / "k21-fig1" / "pipe.csv")  # would hang a reader
    with _running(site) as (host, port, _):
        assert _get(host, port, "/figures/k21-fig1/data.csv")[0] == 200
        assert _get(host, port, "/figures/k21-fig1/")[0] == 200
        code, data = _get(host, port, "/figures/k21-fig1")
        assert code == 301 and b"Location: /figures/k21-fig1/\r\n" in data
        assert _get(host, port, "//evil.example")[0] == 404  # no redirect off the site
        for path in ("/key.txt", "/env.txt", "/.env", "/%2eenv", "/figures/alias/data.csv", "/figures/alias/",
                     "/copy.html", "/figures/k21-fig1/pipe.csv", "/figures/empty/", "/figures/", "/../private/id_rsa",
                     "/figures/%2e%2e/.env", "/index.html/x", "/%ff"):
            code, body = _get(host, port, path, timeout=10)
            assert code == 404 and b"PRIVATE" not in body and b"TOKEN" not in body, path


def test_an_address_or_port_that_cannot_be_used_is_one_usage_line(tmp_path):
    from report_builder.errors import UsageError

    site = _site(tmp_path)
    for kw, words in (({"port": 70000}, "not a port number"), ({"port": -1}, "not a port number"),
                      ({"port": 0, "host": "nonexistent.invalid"}, "cannot listen on nonexistent.invalid"),
                      ({"port": 0, "host": "192.0.2.1"}, "cannot listen on 192.0.2.1")):  # not this machine's
        with pytest.raises(UsageError, match=words):
            serve.serve(site, **kw)
