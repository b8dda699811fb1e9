"""Preview the built site over HTTP (stdlib only): ``report-builder serve``.

Serves the site's own files and nothing else (docs/guide/safety.md):

- **Only a local name.** A request is answered only when its ``Host`` header names this machine as a
  browser on it would: ``127.0.0.1``, ``localhost`` or ``[::1]`` (any port), or the ``--host`` the
  server was bound to (with ``0.0.0.0``/``::``: also any IP address and this machine's host name).
  Anything else answers 421 (a web page whose name was re-pointed at 127.0.0.1 — "DNS rebinding" —
  cannot read the site through the visitor's browser); no ``Host`` at all answers 400.
- **Only regular files inside the folder, reached without a link.** The path is walked one component
  at a time from the site's folder with ``O_NOFOLLOW`` (``openat``): a symbolic link anywhere on the
  way (to a dotfile, out of the site or inside it), a hidden file or folder (``.report_builder-site``,
  ``.report_builder/``, any dotfile), a device or FIFO, and a folder without ``index.html`` (there are
  no directory listings) answer 404.
- **No connection held forever.** A connection idle for `IDLE_TIMEOUT_S` (no request, or a request
  that stops arriving) is closed, and at most `MAX_CONNECTIONS` are served at once (more are closed
  at once), so idle sockets cannot pin one thread each.

Pitfall: binds 127.0.0.1 by default; the site is static, so no rebuild happens on change.
"""
from __future__ import annotations

import email.utils
import http.server
import ipaddress
import os
import socket
import stat
import sys
import threading
import urllib.parse
from http import HTTPStatus
from pathlib import Path

from report_builder.errors import NotBuilt, for_terminal, option

IDLE_TIMEOUT_S = 20.0
"""Seconds a connection may stay silent (before or within a request) before it is closed."""
MAX_CONNECTIONS = 64
"""Connections served at once; one more is closed as soon as it is accepted."""
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("", "0.0.0.0", "::")
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def _host_name(header: str | None) -> str | None:
    """The host of a ``Host`` header without its port (``[::1]:8000`` -> ``::1``), lower case; None when malformed."""
    if not header:
        return None
    h = header.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        if end < 0 or (h[end + 1:] and not (h[end + 1] == ":" and h[end + 2:].isdigit())):
            return None
        return h[1:end]
    name, sep, port = h.partition(":")
    if sep and not port.isdigit():
        return None
    return name.rstrip(".")


def allowed_hosts(host: str) -> tuple[set[str], bool]:
    """The host names a server bound to ``host`` answers to, and whether any IP address is allowed
    (a wildcard bind: the machine's addresses are not known in advance)."""
    names = set(LOCAL_NAMES)
    wildcard = host in WILDCARDS
    if wildcard:
        for n in (socket.gethostname(), socket.getfqdn()):
            if n:
                names.add(n.lower().rstrip("."))
    else:
        names.add(host.lower().strip("[]").rstrip("."))
    return names, wildcard


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


class _Missing(Exception):
    """The path is not a file of the site that may be served (404)."""


def open_inside(root_fd: int, parts: list[str]) -> tuple[int, bool]:
    """``(fd, is_dir)`` of ``parts`` below the folder ``root_fd``, opened one component at a time
    without following a link; `_Missing` for a hidden name, a link, or anything but a regular file or
    folder."""
    fd = os.dup(root_fd)
    try:
        for k, name in enumerate(parts):
            if name in ("", ".", "..") or name.startswith(".") or "/" in name or "\\" in name or "\0" in name:
                raise _Missing(name)
            last = k == len(parts) - 1
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                raise _Missing(name) from None
            if stat.S_ISDIR(st.st_mode):
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            elif stat.S_ISREG(st.st_mode) and last:
                nxt = os.open(name, _FILE_FLAGS, dir_fd=fd)
            else:  # a link, a device, a FIFO, a socket; or a file in the middle of the path
                raise _Missing(name)
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise _Missing("/".join(parts))
        return fd, stat.S_ISDIR(st.st_mode)
    except BaseException:
        os.close(fd)
        raise


def make_server(site_dir: Path, port: int = 8000, host: str = "127.0.0.1", *,
                idle_timeout: float = IDLE_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS
                ) -> http.server.ThreadingHTTPServer:
    """An HTTP server for ``site_dir`` (not started; ``port=0`` picks a free port)."""
    from report_builder.values import check_path

    check_path(str(site_dir), option("site_dir", flag="serve --dir"))
    site_dir = Path(site_dir)
    if not (site_dir / "index.html").is_file():
        raise NotBuilt(f"no built site in {site_dir} (run `report-builder build` first)")
    root = os.path.realpath(site_dir)
    names, any_ip = allowed_hosts(host)

    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                          ".js": "text/javascript", ".json": "application/json", ".svg": "image/svg+xml"}
        timeout = idle_timeout  # every read of the request waits at most this long

        def send_head(self):
            name = _host_name(self.headers.get("Host"))
            if name is None:
                self.send_error(HTTPStatus.BAD_REQUEST, "Missing or malformed Host header")
                return None
            if name not in names and not (any_ip and _is_ip(name)):
                self.send_error(HTTPStatus.MISDIRECTED_REQUEST, "This server answers to 127.0.0.1 and localhost only")
                return None
            try:
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path, errors="strict")
                parts = [p for p in path.split("/") if p]
                fd, is_dir = open_inside(self.server.root_fd, parts)
            except (_Missing, OSError, UnicodeError):
                self.send_error(HTTPStatus.NOT_FOUND, "File not found")
                return None
            if is_dir:
                if not path.endswith("/"):
                    os.close(fd)
                    self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                    self.send_header("Location", "/" + "".join(urllib.parse.quote(p) + "/" for p in parts))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                try:
                    index, _ = open_inside(fd, ["index.html"])
                except (_Missing, OSError):
                    self.send_error(HTTPStatus.NOT_FOUND, "File not found")  # no listings
                    return None
                finally:
                    os.close(fd)
                fd, parts = index, [*parts, "index.html"]
            f = os.fdopen(fd, "rb")
            try:
                os.set_blocking(fd, True)
                st = os.fstat(fd)
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-type", self.guess_type(parts[-1] if parts else "index.html"))
                self.send_header("Content-Length", str(st.st_size))
                self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
                self.send_header("X-Content-Type-Options", "nosniff")
                self.end_headers()
                return f
            except BaseException:
                f.close()
                raise

        def list_directory(self, path):  # never: a folder without index.html is not part of the site
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None

        def log_message(self, format, *args):  # noqa: A002 - quiet by default
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def __init__(self, *args, **kwargs):
            self.root_fd = os.open(root, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
            self.slots = threading.BoundedSemaphore(max_connections)
            try:
                super().__init__(*args, **kwargs)
            except BaseException:
                self._close_root()  # (a failed bind has called server_close already)
                raise

        def process_request(self, request, client_address):
            if not self.slots.acquire(blocking=False):  # every slot taken: this one is closed at once
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.slots.release()
                raise

        def process_request_thread(self, request, client_address):
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.slots.release()

        def server_close(self):
            super().server_close()
            self._close_root()

        def _close_root(self):
            fd, self.root_fd = self.root_fd, -1
            if fd >= 0:
                os.close(fd)

        def handle_error(self, request, client_address):
            if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, TimeoutError)):
                return  # the browser went away mid-response, or stayed silent too long
            super().handle_error(request, client_address)

    if ":" in host:
        Server.address_family = socket.AF_INET6
    return Server((host, port), Handler)


def serve(site_dir: Path, port: int = 8000, host: str = "127.0.0.1") -> None:
    """Serve ``site_dir`` on http://<host>:<port>/ until interrupted (blocking); `UsageError` when the
    port is taken."""
    import errno

    from report_builder.errors import UsageError

    if not 0 <= port <= 65535:
        raise UsageError(f"{option('port', port)} is not a port number (0 to 65535; 0 picks a free one)")
    try:
        server = make_server(site_dir, port, host)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is already in use (another server?); choose another with "
                             f"{option('port')}, or {option('port', 0)} for a free one") from None
        if isinstance(e, socket.gaierror) or e.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EACCES):
            raise UsageError(f"cannot listen on {for_terminal(host)} port {port} ({e.strerror or e}); give "
                             f"{option('host')} an address of this machine (default 127.0.0.1) and a free "
                             f"{option('port')}") from None
        raise
    shown = f"[{host}]" if ":" in host else host
    print(f"Serving {for_terminal(Path(site_dir).resolve())} at http://{shown}:{server.server_address[1]}/ "
          "(Ctrl+C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
