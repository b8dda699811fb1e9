"""Preview the built site over HTTP (stdlib only): ``report-builder serve``.

Serves the site's files and nothing else: a path through a symbolic link that leads out of the site,
a hidden file or folder (``.report_builder-site``, ``.report_builder/``, any dotfile) and a folder
without ``index.html`` (no directory listings) answer 404.

Pitfall: binds 127.0.0.1 by default; the site is static, so no rebuild happens on change.
"""
from __future__ import annotations

import functools
import http.server
import os
import sys
from http import HTTPStatus
from pathlib import Path

from report_builder.errors import for_terminal


def make_server(site_dir: Path, port: int = 8000, host: str = "127.0.0.1") -> http.server.ThreadingHTTPServer:
    """An HTTP server for ``site_dir`` (not started; ``port=0`` picks a free port)."""
    from report_builder.values import check_path

    check_path(str(site_dir), "serve --dir")
    site_dir = Path(site_dir)
    if not (site_dir / "index.html").is_file():
        raise FileNotFoundError(f"no built site in {site_dir} (run `report-builder build` first)")
    root = os.path.realpath(site_dir)

    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                          ".js": "text/javascript", ".json": "application/json", ".svg": "image/svg+xml"}

        def send_head(self):
            path = self.translate_path(self.path)
            rel = os.path.relpath(path, self.directory)
            real = os.path.realpath(path)
            hidden = rel != "." and any(part.startswith(".") for part in Path(rel).parts)
            outside = real != root and not real.startswith(root + os.sep)
            listing = os.path.isdir(real) and not os.path.isfile(os.path.join(real, "index.html"))
            if hidden or outside or listing:
                self.send_error(HTTPStatus.NOT_FOUND, "File not found")
                return None
            return super().send_head()

        def list_directory(self, path):  # never: a folder without index.html is not part of the site
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None

        def log_message(self, format, *args):  # noqa: A002 - quiet by default
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                return  # the browser went away mid-response (navigation, aborted request)
            super().handle_error(request, client_address)

    handler = functools.partial(Handler, directory=str(site_dir))
    return Server((host, port), handler)


def serve(site_dir: Path, port: int = 8000, host: str = "127.0.0.1") -> None:
    """Serve ``site_dir`` on http://<host>:<port>/ until interrupted (blocking); `UsageError` when the
    port is taken."""
    import errno

    from report_builder.errors import UsageError

    try:
        server = make_server(site_dir, port, host)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is already in use (another server?); choose another with "
                             f"--port, or --port 0 for a free one") from None
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
