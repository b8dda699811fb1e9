"""Checks of configured values that reach pages, charts, the terminal and the filesystem: ``site_url``
parsed as a web address (`check_site_url`), names, ids, paths and sentences as plain text (`plain_text`),
and the path keys as paths this filesystem can hold (`check_path`).

`config.validate` runs them on every configuration (YAML, ``--set``, CLI options, the Python API);
`site.build.render_site` checks ``site_url`` again where it is handed to mkdocs. Tested by
``tests/test_safety_inputs.py`` (the payloads) and ``tests/site/test_hostile.py`` (in Chromium).
"""
from __future__ import annotations

import re
from typing import Any

from report_builder.errors import ConfigError, shown

DEVICE_FORM = re.compile(r"cpu|cuda(:[0-9]{1,4})?")
"""The devices a build, `check`, `bench` or `reproduce` runs on (`config.DEVICES` names them; whether this
machine has one is `models.device_plan.device_problem`'s question)."""

SITE_URL_MAX = 2000
"""The longest ``site_url`` accepted."""


def plain_text(value: Any, key: str) -> None:
    """Refuse a configured name, id, path or sentence holding a character that no page, chart or
    terminal can show as text: a control character (C0 such as ESC or a line break, DEL, C1), a lone
    surrogate or a noncharacter (U+FFFE); SVG and XML cannot hold them at all (drawing a chart
    labelled with one aborts the SVG renderer). Other text is kept, and escaped where it is shown.

    Raises:
        ConfigError: naming ``key`` and the character.
    """
    import unicodedata

    if not isinstance(value, str) or (value.isascii() and value.isprintable()):
        return
    for c in value:
        o = ord(c)
        if unicodedata.category(c) in ("Cc", "Cs") or 0xFDD0 <= o <= 0xFDEF or (o & 0xFFFE) == 0xFFFE:
            raise ConfigError(f"{key}: {shown(value, 80)} holds {_codepoint(c)}, a control character or "
                              "noncharacter; names, ids, paths and sentences of the configuration are plain text")


def _codepoint(c: str) -> str:
    import unicodedata

    return f"U+{ord(c):04X}" + (f" ({unicodedata.name(c)})" if unicodedata.name(c, "") else "")


def check_site_url(value: Any) -> str:
    """``site_url`` validated as the address the site is published at, normalised to end in ``/``.

    It reaches every page's ``<link rel="canonical">``, the sitemap and the 404 page's links, so it is
    parsed, not pattern-matched on a prefix: scheme ``http`` or ``https``; a host (DNS name, IPv4 or
    bracketed IPv6; no user or password) with an optional port; a path of URL characters only —
    letters, digits, ``- . _ ~ / % ! $ * + , ; = : @`` with ``%`` starting a two-digit escape; no query
    or fragment. Quotes, angle brackets, ``&``, backslashes, whitespace and control or non-ASCII
    characters are refused (percent-encode them), so the value is inert in HTML, XML and the terminal.

    Raises:
        ConfigError: naming ``site_url`` and what is wrong.
    """
    import ipaddress
    import re
    from urllib.parse import urlsplit

    def bad(why: str) -> ConfigError:
        return ConfigError(f"site_url: expected the published address, e.g. https://example.org/report/, got "
                           f"{shown(value)}: {why}")

    if not isinstance(value, str):
        raise bad("not text")
    if len(value) > SITE_URL_MAX:
        raise bad(f"longer than {SITE_URL_MAX} characters")
    odd = sorted({c for c in value if not (c.isascii() and c.isprintable()) or c in " \"'<>`\\{}|^&"})
    if odd:
        raise bad("it contains " + ", ".join(repr(c) for c in odd[:5])
                  + "; percent-encode such characters (%20 for a space)")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as e:
        raise bad(str(e)) from None
    if parts.scheme.lower() not in ("http", "https") or not value.lower().startswith(parts.scheme.lower() + "://"):
        raise bad("it must start with https:// or http://")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise bad("a user name or password does not belong in it")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise bad("a query (?...) or fragment (#...) does not belong in it")
    host = parts.hostname or ""
    if not host:
        raise bad("it names no host")
    if parts.netloc.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad(f"{host!r} is not an IPv6 address") from None
    elif not re.fullmatch(r"(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
                          r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?", host):
        raise bad(f"{host!r} is not a host name")
    if port is not None and not 0 < port < 65536:
        raise bad(f"port {port} is out of range")
    path = parts.path
    if not re.fullmatch(r"(/([A-Za-z0-9\-._~!$()*+,;=:@]|%[0-9A-Fa-f]{2})*)*", path):
        raise bad("its path has a character that is not allowed in a URL path (a % must start a two-digit "
                  "escape)")
    scheme = parts.scheme.lower()
    return f"{scheme}://{parts.netloc.lower()}{path.rstrip('/')}/"


TEMP_SIBLING_ROOM = 40
"""Bytes the tool adds to the output folder's name for its temporary siblings (``.<out>-docs.tmp-<pid>@<host>-…``)."""


def check_path(value: Any, key: str, *, reserve: int = 0, error: type[Exception] = ConfigError) -> None:
    """Refuse a path key (``out_dir``, ``cache_dir``, ``data_dir``, a dataset's ``path``) that no command
    could use, before any work, in one line: not text or empty; a control character such as NUL
    (`plain_text`); a folder name longer than the filesystem allows (its ``NAME_MAX``, minus ``reserve``
    bytes for the last one: room for the temporary siblings of ``out_dir``) or a path longer than its
    ``PATH_MAX``; or a path through a file (``notes.txt/site``). Whether the folder itself may be used is
    `guard`'s question (it exists, is the tool's, is writable). Commands check their path arguments with
    it too (``--config``, ``serve --dir``, ``reproduce PATH``, ``diff OLD NEW``), raising their own ``error``.

    Raises:
        ConfigError (or ``error``): naming ``key`` and what is wrong.
    """
    import os

    if not isinstance(value, str) or not value.strip():
        raise error(f"{key}: expected a path, got {shown(value)}")
    try:
        plain_text(value, key)
    except ConfigError as e:
        raise error(str(e)) from None
    full = os.path.abspath(os.path.expanduser(value))
    there = full
    while not os.path.lexists(there):  # False for a name too long to look up: its parent is tried
        there = os.path.dirname(there)
    if there != full and not os.path.isdir(there):
        raise error(f"{key}: {shown(value)} goes through {shown(there)}, which is a file, not a folder; "
                    "give a path of folders")
    folder = there if os.path.isdir(there) else os.path.dirname(there)

    def limit(name: str, default: int) -> int:
        try:
            return int(os.pathconf(folder, name))
        except (OSError, ValueError):
            return default

    name_max, path_max = limit("PC_NAME_MAX", 255), limit("PC_PATH_MAX", 4096)
    parts = [c for c in full.split(os.sep) if c]
    for k, part in enumerate(parts):
        room = name_max - (reserve if k == len(parts) - 1 else 0)
        size = len(part.encode("utf-8", "surrogateescape"))
        if size > room:
            last = reserve and k == len(parts) - 1
            raise error(f"{key}: the name {shown(part, 60)} is {size} bytes; this filesystem allows {name_max} "
                        + (f"(less {reserve} for the tool's temporary folders beside it) " if last else "")
                        + "for one name in a path: choose a shorter one")
    total = len(full.encode("utf-8", "surrogateescape"))
    if total >= path_max:
        raise error(f"{key}: the path is {total} bytes long; this filesystem allows {path_max - 1}: choose a "
                    "shorter one")
