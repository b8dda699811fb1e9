"""SVG that may be published: an allow-list of what our charts and diagrams draw, checked and enforced.

A drawing taken from a cache entry (a figure's ``chart.svg`` reused by `figure_cache`, a render of
`figure_files.RenderCache`) is input like any other, whatever its signature says: a page inlines it
and a browser opening ``chart.svg`` runs what it holds. `is_safe` says whether an SVG holds only what
Vega's SVG renderer and `figures.charts.diagrams` emit — the elements and attributes of `ALLOWED`,
``url(#id)`` references only, links (``href``) to a local ``#id``, a relative path or a ``data:``
PNG/JPEG/GIF/WebP image, no comment, CDATA section, processing instruction or DTD — and `sanitise`
returns an SVG that does: the text itself, byte for byte, when it is safe (so a genuine chart is
published unchanged and no content hash moves), else a copy rebuilt from the allowed parts only
(no ``<script>``, ``<foreignObject>``, ``<iframe>``/``<embed>``/``<object>``, event handler
``on*=``, ``javascript:``/``data:`` link or link to another host), or ``""`` when it is not
well-formed XML.

Parsing is the standard library's expat with namespaces, and a document type declaration is refused
before anything is expanded (as defusedxml does): no entity is ever defined, so none can be expanded
(no "billion laughs", no external entity); size is capped (`MAX_BYTES`).

Pitfall: the check is on the XML, and the page's HTML parser reads the inline copy; constructs where
the two parsers may disagree (comments, CDATA sections, processing instructions) are therefore never
accepted, and every name is matched exactly (case and namespace).
"""
from __future__ import annotations

import re
from xml.parsers import expat

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
XML_NS = "http://www.w3.org/XML/1998/namespace"
MAX_BYTES = 128 << 20
"""The largest SVG that is checked at all (larger: not safe; the paper preset's largest chart is a few MB)."""

_PAINT = {"fill", "fill-opacity", "stroke", "stroke-opacity", "stroke-width", "stroke-linecap", "stroke-linejoin",
          "stroke-dasharray", "stroke-dashoffset", "stroke-miterlimit", "opacity", "display", "visibility",
          "pointer-events", "cursor", "clip-path", "transform", "shape-rendering", "image-rendering",
          "marker-start", "marker-mid", "marker-end", "color"}
_FONT = {"font-family", "font-size", "font-style", "font-variant", "font-weight", "text-anchor",
         "dominant-baseline", "text-decoration", "letter-spacing"}
_ARIA = {"id", "class", "role", "aria-label", "aria-hidden", "aria-roledescription", "aria-labelledby",
         "aria-describedby"}
_GRAPHIC = _PAINT | _FONT | _ARIA
ALLOWED: dict[str, frozenset[str]] = {name: frozenset(attrs) for name, attrs in {
    "svg": _GRAPHIC | {"width", "height", "viewBox", "version", "preserveAspectRatio", "x", "y"},
    "g": _GRAPHIC,
    "defs": _ARIA,
    "title": {"id"},
    "desc": {"id"},
    "path": _GRAPHIC | {"d"},
    "rect": _GRAPHIC | {"x", "y", "width", "height", "rx", "ry"},
    "circle": _GRAPHIC | {"cx", "cy", "r"},
    "ellipse": _GRAPHIC | {"cx", "cy", "rx", "ry"},
    "line": _GRAPHIC | {"x1", "y1", "x2", "y2"},
    "polyline": _GRAPHIC | {"points"},
    "polygon": _GRAPHIC | {"points"},
    "text": _GRAPHIC | {"x", "y", "dx", "dy"},
    "tspan": _GRAPHIC | {"x", "y", "dx", "dy"},
    "image": _GRAPHIC | {"x", "y", "width", "height", "preserveAspectRatio", "href", f"{XLINK_NS} href"},
    "clipPath": _ARIA | {"clipPathUnits", "transform"},
    "linearGradient": _ARIA | {"x1", "y1", "x2", "y2", "gradientUnits", "gradientTransform", "spreadMethod"},
    "radialGradient": _ARIA | {"cx", "cy", "r", "fx", "fy", "fr", "gradientUnits", "gradientTransform",
                               "spreadMethod"},
    "stop": {"id", "offset", "stop-color", "stop-opacity"},
    "marker": _ARIA | {"viewBox", "refX", "refY", "markerWidth", "markerHeight", "markerUnits", "orient",
                       "preserveAspectRatio"},
}.items()}
"""SVG element -> the attributes it may carry: what Vega's SVG renderer (vl-convert) and
`figures.charts.diagrams` emit, and their plain geometric relatives. Nothing scripted, animated,
styled by a stylesheet or holding other markup (``script``, ``style``, ``a``, ``use``, ``animate``,
``set``, ``foreignObject``, ``iframe``, ``embed``, ``object``, ``on*``, ``style=``) is in it."""
_TEXT = frozenset({"title", "desc", "text", "tspan"})
"""Elements whose character data is drawn or read (elsewhere only whitespace is expected)."""
_HREF = ("href", f"{XLINK_NS} href")
_URL = re.compile(r"url\(", re.I)
_LOCAL_URL = re.compile(r"""url\(\s*(['"]?)#[A-Za-z_][\w.:-]*\1\s*\)""")
_SAFE_HREF = re.compile(r"#[A-Za-z_][\w.:-]*|data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*"
                        r"|(?![a-zA-Z][a-zA-Z0-9+.-]*:)(?!//)(?!/)(?!\\)[A-Za-z0-9._~%/-]+")
"""A local fragment, an inline raster image, or a relative path on the same site (no scheme, host or
root: ``javascript:``, ``data:text/html``, ``//evil.example/x`` and ``http://…`` are refused)."""
_ID = re.compile(r"[A-Za-z_][\w.:-]{0,127}")


class _Refused(Exception):
    """Raised inside the parser's callbacks: the document is not accepted."""


def _value_ok(attr: str, value: str) -> bool:
    if attr in _HREF:
        return _SAFE_HREF.fullmatch(value) is not None
    if attr == "id":
        return _ID.fullmatch(value) is not None
    if attr in _PAINT and "\\" in value:  # a CSS escape could spell url( another way
        return False
    if _URL.search(value):
        return attr in _PAINT and not _URL.search(_LOCAL_URL.sub("", value))
    return True


def _local_name(name: str) -> tuple[str, str]:
    ns, _, local = name.rpartition(" ")
    return ns, local


class _Walker:
    """One expat pass; ``out`` (when given) collects the allowed parts as SVG text."""

    def __init__(self, rebuild: bool) -> None:
        self.problems: list[str] = []
        self.out: list[str] | None = [] if rebuild else None
        self.stack: list[bool] = []  # per open element: kept?
        self.xlink = False
        self.parser = expat.ParserCreate(namespace_separator=" ")
        p = self.parser
        p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        p.StartDoctypeDeclHandler = self._doctype
        p.EntityDeclHandler = self._doctype
        p.ExternalEntityRefHandler = self._doctype
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        p.CharacterDataHandler = self._text
        p.CommentHandler = lambda _data: self._problem("a comment")
        p.StartCdataSectionHandler = lambda: self._problem("a CDATA section")
        p.ProcessingInstructionHandler = lambda target, _data: self._problem(f"a processing instruction <?{target}")

    def _doctype(self, *_args) -> None:
        raise _Refused("a document type declaration")

    def _problem(self, what: str) -> None:
        self.problems.append(what)
        if self.out is None:
            raise _Refused(what)

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        ns, local = _local_name(name)
        parent_kept = not self.stack or self.stack[-1]
        allowed = ALLOWED.get(local) if ns == SVG_NS else None
        if not self.stack and (ns, local) != (SVG_NS, "svg"):
            raise _Refused(f"the root element is not <svg> in the SVG namespace (<{local}>)")
        keep = parent_kept and allowed is not None
        if allowed is None:
            self._problem(f"the element <{local}>")
        kept_attrs = []
        for a, v in attrs.items():
            if keep and a in allowed and _value_ok(a, v):
                kept_attrs.append((a, v))
            elif keep:
                self._problem(f"the attribute {_local_name(a)[1]}= on <{local}>")
        self.stack.append(keep)
        if keep and self.out is not None:
            parts = [f"<{local}"]
            if len(self.stack) == 1:
                parts.append(f' xmlns="{SVG_NS}"')
                parts.append("\0XLINK\0")  # the xlink namespace, declared when a kept link needs it
            for a, v in kept_attrs:
                if a.startswith(XLINK_NS + " "):
                    self.xlink = True
                    a = "xlink:" + _local_name(a)[1]
                parts.append(f' {a}="{_escape(v, True)}"')
            self.out.append("".join(parts) + ">")

    def _end(self, name: str) -> None:
        keep = self.stack.pop()
        if keep and self.out is not None:
            self.out.append(f"</{_local_name(name)[1]}>")

    def _text(self, data: str) -> None:
        if self.stack and self.stack[-1] and self.out is not None:
            self.out.append(_escape(data, False))

    def run(self, svg: str) -> str | None:
        """The rebuilt SVG (rebuild mode) or None; raises `_Refused` / `expat.ExpatError`."""
        self.parser.Parse(svg, True)
        if self.out is None:
            return None
        text = "".join(self.out)
        return text.replace("\0XLINK\0", f' xmlns:xlink="{XLINK_NS}"' if self.xlink else "", 1)


def _escape(text: str, attr: bool) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if attr else text


def problems(svg: str | bytes) -> list[str]:
    """What keeps ``svg`` from being published as it is (empty: `is_safe`)."""
    try:
        text = svg.decode("utf-8") if isinstance(svg, bytes) else svg
    except UnicodeDecodeError:
        return ["it is not UTF-8"]
    if len(text) > MAX_BYTES:
        return [f"it is larger than {MAX_BYTES >> 20} MiB"]
    w = _Walker(rebuild=False)
    try:
        w.run(text)
    except _Refused as e:
        return [str(e)]
    except (expat.ExpatError, ValueError) as e:
        return [f"it is not well-formed XML ({e})"]
    return w.problems


def is_safe(svg: str | bytes) -> bool:
    """Whether ``svg`` holds only what `ALLOWED` names (see the module docstring)."""
    return not problems(svg)


def sanitise(svg: str) -> str:
    """``svg`` itself when it `is_safe` (byte for byte); else a copy holding only its allowed elements,
    attributes and text; ``""`` when it cannot be read as XML at all (a DTD, malformed, too large)."""
    if not problems(svg):
        return svg
    if not isinstance(svg, str) or len(svg) > MAX_BYTES:
        return ""
    w = _Walker(rebuild=True)
    try:
        return w.run(svg) or ""
    except (_Refused, expat.ExpatError, ValueError):
        return ""
