"""Checks of configured values that reach pages, charts and the terminal: ``site_url`` parsed as a
web address (`check_site_url`) and names, ids, paths and sentences as plain text (`plain_text`).

`config.validate` runs them on every configuration (YAML, ``--set``, CLI options, the Python API);
`site.build.render_site` checks ``site_url`` again where it is handed to mkdocs. Tested by
``tests/test_safety_inputs.py`` (the payloads) and ``tests/site/test_hostile.py`` (in Chromium).
"""
from __future__ import annotations

from typing import Any

from report_builder.errors import ConfigError, shown

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
