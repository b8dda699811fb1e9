"""Checks that an exported ``chart.svg`` stands alone when printed or pasted into a paper.

Reads the SVG that Vega wrote (no browser) and reports, per file:

- ``small text``: any text below 9 pt at 100 % (9 pt = 12 CSS px, the SVG's user unit);
- ``overlap``: two text boxes that overlap (boxes estimated from font size, weight and the string's
  characters with Helvetica/Arial advance widths; only the cap-height band counts vertically, so
  stacked lines that merely touch are not reported);
- ``legend colour``: two legend entries with different labels drawn in the same colour, or a
  swatch so faint (opacity below 0.5) that its colour cannot be told apart from grey;
- ``raw BPE``: byte-level BPE markers (``Ġ``, ``Ċ``, ``âĢ``…) in any text.

Pitfall: the box widths are estimates (the renderer's fonts are not known here); the advance table
errs on the wide side; two boxes closer than 1 px count as colliding (they read as one word).

Usage: ``python -m tests.svg_check SITE_DIR`` lists the defects of every ``figures/*/chart.svg``.
"""
from __future__ import annotations

import math
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

MIN_FONT_PX = 12.0  # 9 pt at 96 dpi
MIN_SWATCH_ALPHA = 0.5
OVERLAP_TOLERANCE_PX = -1.0  # boxes closer than 1 px read as one word
# Byte-level BPE shows a space as Ġ (U+0120), a newline as Ċ (U+010A); UTF-8 multi-byte characters
# decoded byte-wise show up as â/Ã followed by a byte character (e.g. "âĢĵ" for an en dash).
BPE_MARKERS = re.compile(r"[\u0120\u010a\u0109]|â[\u0100-\u017f\u0080-\u00bf]|Ã[\u0080-\u00bf]")

_NS = "{http://www.w3.org/2000/svg}"
_NARROW = set("il.,:;'|!ijtfI[]()`·")
_WIDE = set("mwMW@%")
_UPPER = set("ABCDEFGHJKLNOPQRSTUVXYZ&")
_DIGITS = set("0123456789$#+-=<>~^*?_")


def char_width(ch: str, size: float, bold: bool = False) -> float:
    """Advance width of one character (Helvetica/Arial metrics, rounded up)."""
    if ch == " ":
        w = 0.28
    elif ch in _NARROW:
        w = 0.3
    elif ch in _WIDE:
        w = 0.86
    elif ch in _UPPER:
        w = 0.68
    elif ch in _DIGITS:
        w = 0.56
    elif ord(ch) > 0x2e80:  # CJK and other full-width scripts
        w = 1.0
    else:
        w = 0.54
    return w * size * (1.07 if bold else 1.0)


def text_width(text: str, size: float, bold: bool = False) -> float:
    return sum(char_width(c, size, bold) for c in text)


Matrix = tuple[float, float, float, float, float, float]  # a b c d e f (SVG order)
IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _mul(m: Matrix, n: Matrix) -> Matrix:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (a * a2 + c * b2, b * a2 + d * b2, a * c2 + c * d2, b * c2 + d * d2,
            a * e2 + c * f2 + e, b * e2 + d * f2 + f)


def parse_transform(text: str | None) -> Matrix:
    """SVG ``transform`` attribute as one affine matrix (translate, rotate, scale, matrix)."""
    m = IDENTITY
    for name, args in re.findall(r"(\w+)\s*\(([^)]*)\)", text or ""):
        v = [float(x) for x in re.split(r"[\s,]+", args.strip()) if x]
        if name == "translate":
            n = (1.0, 0.0, 0.0, 1.0, v[0], v[1] if len(v) > 1 else 0.0)
        elif name == "scale":
            n = (v[0], 0.0, 0.0, v[1] if len(v) > 1 else v[0], 0.0, 0.0)
        elif name == "rotate":
            r = math.radians(v[0])
            n = (math.cos(r), math.sin(r), -math.sin(r), math.cos(r), 0.0, 0.0)
            if len(v) == 3:
                n = _mul(_mul((1, 0, 0, 1, v[1], v[2]), n), (1, 0, 0, 1, -v[1], -v[2]))
        elif name == "matrix":
            n = tuple(v)  # type: ignore[assignment]
        else:
            continue
        m = _mul(m, n)
    return m


def _apply(m: Matrix, x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = m
    return a * x + c * y + e, b * x + d * y + f


@dataclass(frozen=True)
class TextBox:
    text: str
    size: float  # font size in px, after scaling
    x0: float
    y0: float
    x1: float
    y1: float
    role: str  # the Vega role of the enclosing mark, e.g. "axis-label", "legend-label", "mark"
    corners: tuple[tuple[float, float], ...] = ()  # the (possibly rotated) box, in order

    def overlaps(self, other: "TextBox", tol: float = OVERLAP_TOLERANCE_PX) -> bool:
        """Whether the two (possibly rotated) boxes overlap by more than ``tol`` px (separating axes)."""
        if not (min(self.x1, other.x1) - max(self.x0, other.x0) > tol
                and min(self.y1, other.y1) - max(self.y0, other.y0) > tol):
            return False
        for poly in (self.corners, other.corners):
            for k in range(len(poly)):
                (ax, ay), (bx, by) = poly[k], poly[(k + 1) % len(poly)]
                nx, ny = by - ay, ax - bx
                norm = math.hypot(nx, ny) or 1.0
                nx, ny = nx / norm, ny / norm
                p = [x * nx + y * ny for x, y in self.corners]
                q = [x * nx + y * ny for x, y in other.corners]
                if min(max(p), max(q)) - max(min(p), min(q)) <= tol:
                    return False
        return True


@dataclass(frozen=True)
class Swatch:
    label: str
    colour: str
    alpha: float


@dataclass(frozen=True)
class Defect:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def _px(value: str | None, default: float = 11.0) -> float:
    if not value:
        return default
    m = re.match(r"([\d.]+)\s*(px|pt)?", value)
    if not m:
        return default
    return float(m.group(1)) * (4 / 3 if m.group(2) == "pt" else 1.0)


def _role(classes: str) -> str | None:
    m = re.search(r"\brole-([\w-]+)", classes)
    return m.group(1) if m else None


def _text_of(el: ET.Element) -> list[tuple[str, float]]:
    """Lines of a <text> element with their vertical offset (tspans with dy)."""
    spans = el.findall(f"{_NS}tspan")
    if not spans:
        return [("".join(el.itertext()), 0.0)]
    out, dy = [], 0.0
    for s in spans:
        dy += _px(s.get("dy"), 0.0) if s.get("dy") else 0.0
        out.append(("".join(s.itertext()), dy))
    return out


def _opacity(el: ET.Element, attr: str) -> float:
    a = float(el.get("opacity", 1) or 1)
    own = el.get(f"{attr}-opacity")
    return a * (float(own) if own is not None else 1.0)


def read_svg(path_or_text: str | Path) -> tuple[list[TextBox], list[list[Swatch]]]:
    """Every text box (page coordinates) and every symbol legend's swatches of one SVG."""
    text = path_or_text.read_text(encoding="utf-8") if isinstance(path_or_text, Path) else path_or_text
    root = ET.fromstring(text)
    boxes: list[TextBox] = []
    legends: list[list[Swatch]] = []

    def walk(el: ET.Element, m: Matrix, role: str, legend: list[Swatch] | None,
             entry: dict | None, parent_scope: bool = False) -> None:
        m = _mul(m, parse_transform(el.get("transform")))
        r = _role(el.get("class", "")) or role
        tag = el.tag.replace(_NS, "")
        if r == "legend" and role != "legend":
            legend = []
            legends.append(legend)
        if tag == "g" and parent_scope and legend is not None:  # one legend entry
            entry = {"colour": None, "alpha": 1.0, "label": None}
        if tag == "text":
            size = _px(el.get("font-size"))
            bold = el.get("font-weight") in ("bold", "700", "800", "900")
            anchor = el.get("text-anchor", "start")
            sx = math.hypot(m[0], m[1])
            for line, dy in _text_of(el):
                if not line.strip():
                    continue
                w = text_width(line, size, bold)
                x = float(el.get("x", 0) or 0)
                y = float(el.get("y", 0) or 0) + dy
                x0 = x - (w if anchor == "end" else w / 2 if anchor == "middle" else 0.0)
                # the cap-height band above the baseline (descenders excluded)
                top = y - 0.72 * size
                corners = tuple(_apply(m, cx, cy) for cx, cy in ((x0, top), (x0 + w, top), (x0 + w, y), (x0, y)))
                xs, ys = [c[0] for c in corners], [c[1] for c in corners]
                boxes.append(TextBox(line, size * sx, min(xs), min(ys), max(xs), max(ys), r, corners))
                if entry is not None and r == "legend-label":
                    entry["label"] = line
        elif tag in ("path", "rect", "circle") and entry is not None and r == "legend-symbol":
            fill, stroke = el.get("fill"), el.get("stroke")
            if fill and fill not in ("none", "transparent"):
                entry["colour"], entry["alpha"] = fill.lower(), _opacity(el, "fill")
            elif stroke and stroke not in ("none", "transparent"):
                entry["colour"], entry["alpha"] = stroke.lower(), _opacity(el, "stroke")
        scope = tag == "g" and "role-scope" in el.get("class", "")
        for child in el:
            walk(child, m, r, legend, entry, scope)
        if tag == "g" and parent_scope and legend is not None and entry:
            if entry["label"] is not None and entry["colour"] is not None:
                legend.append(Swatch(entry["label"], entry["colour"], entry["alpha"]))

    walk(root, IDENTITY, "", None, None)
    return boxes, legends


def _overlaps(boxes: list[TextBox]) -> list[tuple[TextBox, TextBox]]:
    """Pairs of overlapping boxes (grid buckets, so large tables stay fast)."""
    cell = 64.0
    grid: dict[tuple[int, int], list[int]] = {}
    for k, b in enumerate(boxes):
        for gx in range(int(b.x0 // cell), int(b.x1 // cell) + 1):
            for gy in range(int(b.y0 // cell), int(b.y1 // cell) + 1):
                grid.setdefault((gx, gy), []).append(k)
    pairs: set[tuple[int, int]] = set()
    for ids in grid.values():
        for a in range(len(ids)):
            for b in range(a + 1, len(ids)):
                i, j = ids[a], ids[b]
                if (i, j) not in pairs and boxes[i].overlaps(boxes[j]):
                    pairs.add((i, j))
    return [(boxes[i], boxes[j]) for i, j in sorted(pairs)]


def check_svg(path_or_text: str | Path, max_each: int = 5) -> list[Defect]:
    """The defects of one exported SVG (empty when it stands alone)."""
    boxes, legends = read_svg(path_or_text)
    out: list[Defect] = []

    small = [b for b in boxes if b.size < MIN_FONT_PX - 1e-6]
    for b in small[:max_each]:
        out.append(Defect("small text", f"{b.text!r} at {b.size:g}px ({b.size * 0.75:g}pt) < 9pt [{b.role}]"))
    if len(small) > max_each:
        out.append(Defect("small text", f"... and {len(small) - max_each} more"))

    pairs = _overlaps(boxes)
    for a, b in pairs[:max_each]:
        out.append(Defect("overlap", f"{a.text!r} [{a.role}] and {b.text!r} [{b.role}] "
                                     f"near ({a.x0:.0f}, {a.y0:.0f})"))
    if len(pairs) > max_each:
        out.append(Defect("overlap", f"... and {len(pairs) - max_each} more"))

    for legend in legends:
        by_colour: dict[str, set[str]] = {}
        for s in legend:
            by_colour.setdefault(s.colour, set()).add(s.label)
            if s.alpha < MIN_SWATCH_ALPHA:
                out.append(Defect("legend colour", f"swatch of {s.label!r} is faint (opacity {s.alpha:g})"))
        for colour, labels in by_colour.items():
            if len(labels) > 1:
                out.append(Defect("legend colour", f"{sorted(labels)} share {colour}"))

    raw = [b.text for b in boxes if BPE_MARKERS.search(b.text)]
    for t in raw[:max_each]:
        out.append(Defect("raw BPE", repr(t)))
    if len(raw) > max_each:
        out.append(Defect("raw BPE", f"... and {len(raw) - max_each} more"))
    return out


def check_site(site: Path) -> dict[str, list[Defect]]:
    """Defects of every ``figures/<id>/chart.svg`` of a built site, by figure id."""
    return {p.parent.name: check_svg(p) for p in sorted((site / "figures").glob("*/chart.svg"))}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.svg_check SITE_DIR")
        return 2
    report = check_site(Path(argv[0]))
    bad = 0
    for fig_id, defects in report.items():
        if defects:
            bad += 1
            print(f"{fig_id}:")
            for d in defects:
                print(f"  {d}")
    print(f"{bad} of {len(report)} figures have defects")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
