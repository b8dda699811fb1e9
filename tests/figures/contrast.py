"""WCAG contrast of two sRGB colours (``#rrggbb``), for the tests that check what a reader can see."""
from __future__ import annotations


def _luminance(hex_colour: str) -> float:
    rgb = [int(hex_colour.lstrip("#")[k:k + 2], 16) / 255 for k in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    """The contrast ratio, 1 (same) to 21 (black on white)."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)
