"""Diagrams of a layer: the K21 attention block as standalone SVG, K24 post-/pre-LN layers as Altair marks.

* `chain_diagram_svg` — a left-to-right chain of blocks with residual skips and bracketed spans, as
  an accessible SVG string using ``currentColor`` (K21 Fig. 2). Returns a string, not a chart.
* `layer_diagram` — boxes, arrows and a dashed marker where each scope is read (K24 Fig. 1).

Pitfall: the two outputs differ in kind (an inline SVG vs a Vega-Lite spec that is hashed with the
maps beside it); they share the node vocabulary, not the drawing code.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

import altair as alt
import pandas as pd

from report_builder import schema
from report_builder.figures import theme
from report_builder.figures.charts.data import inline_data


@dataclass(frozen=True)
class Stage:
    """One node of `chain_diagram_svg`: ``kind`` ``"box"`` (a block) or ``"add"`` (a ⊕ node);
    ``note`` lines are printed under the node."""

    label: str
    kind: str = "box"
    note: tuple[str, ...] = ()


def chain_diagram_svg(
    stages: Sequence[Stage],
    *,
    skips: Sequence[tuple[int, int]] = (),
    spans: Sequence[tuple[str, int, int]] = (),
    input_label: str = "x",
    output_label: str = "y",
    title: str = "",
    description: str = "",
    width: int = 760,
) -> str:
    """A left-to-right chain of blocks as a standalone, accessible SVG string (no external assets).

    Args:
        stages: the nodes in order.
        skips: residual connections ``(a, b)``: the input of stage ``a`` is added at stage ``b``
            (which should be an ``"add"`` node), drawn as an arrow above the chain.
        spans: brackets below the chain ``(label, first, last)`` naming what a method or scope covers.
        input_label / output_label: text at the two ends. title / description: ``<title>``/``<desc>``.

    Returns:
        SVG markup using ``currentColor`` for lines and text (follows the page's light/dark theme).
    """
    esc = html.escape
    n = len(stages)
    margin, io_w = 16, 44
    slot = (width - 2 * margin - 2 * io_w) / max(n, 1)
    box_w, box_h, add_r = min(96.0, slot * 0.62), 40, 13
    y_mid = 86
    note_lines = max((len(s.note) for s in stages), default=0)
    span_top = y_mid + box_h / 2 + 18 + 14 * note_lines + 8
    height = int(span_top + 26 * len(spans) + 12)
    cx = [margin + io_w + slot * (k + 0.5) for k in range(n)]

    def left(k):
        return cx[k] - (add_r if stages[k].kind == "add" else box_w / 2)

    def right(k):
        return cx[k] + (add_r if stages[k].kind == "add" else box_w / 2)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-labelledby="d-title d-desc" font-family="{esc(theme.FONT)}" font-size="13">',
        f'<title id="d-title">{esc(title)}</title><desc id="d-desc">{esc(description)}</desc>',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="currentColor"/></marker></defs>',
        '<g stroke="currentColor" fill="none" stroke-width="1.5">',
    ]
    # arrows along the chain
    out.append(f'<line x1="{margin + io_w - 8}" y1="{y_mid}" x2="{left(0) - 2}" y2="{y_mid}" marker-end="url(#arrow)"/>')
    for k in range(n - 1):
        out.append(f'<line x1="{right(k)}" y1="{y_mid}" x2="{left(k + 1) - 2}" y2="{y_mid}" marker-end="url(#arrow)"/>')
    out.append(f'<line x1="{right(n - 1)}" y1="{y_mid}" x2="{width - margin - io_w + 6}" y2="{y_mid}" marker-end="url(#arrow)"/>')
    # residual skips
    for idx, (a, b) in enumerate(skips):
        xa = (left(a) + (right(a - 1) if a > 0 else margin + io_w - 8)) / 2
        top = y_mid - box_h / 2 - 22 - 10 * idx
        out.append(
            f'<path d="M{xa},{y_mid} L{xa},{top} L{cx[b]},{top} L{cx[b]},{y_mid - add_r - 2}" '
            f'marker-end="url(#arrow)"/>'
        )
    out.append("</g>")
    # nodes
    for k, s in enumerate(stages):
        if s.kind == "add":
            out.append(f'<circle cx="{cx[k]}" cy="{y_mid}" r="{add_r}" fill="#E69F00" fill-opacity="0.18" '
                       f'stroke="currentColor" stroke-width="1.5"/>')
            out.append(f'<text x="{cx[k]}" y="{y_mid + 5}" text-anchor="middle" fill="currentColor" '
                       f'font-size="16">+</text>')
        else:
            out.append(f'<rect x="{cx[k] - box_w / 2}" y="{y_mid - box_h / 2}" width="{box_w}" height="{box_h}" '
                       f'rx="6" fill="#0072B2" fill-opacity="0.14" stroke="currentColor" stroke-width="1.5"/>')
            out.append(f'<text x="{cx[k]}" y="{y_mid + 5}" text-anchor="middle" fill="currentColor" '
                       f'font-size="13" font-weight="600">{esc(s.label)}</text>')
        if s.kind == "add" and s.label:
            out.append(f'<text x="{cx[k] + add_r + 4}" y="{y_mid - add_r - 2}" text-anchor="start" '
                       f'fill="currentColor" font-size="12">{esc(s.label)}</text>')
        for ln, line in enumerate(s.note):
            out.append(f'<text x="{cx[k]}" y="{y_mid + box_h / 2 + 18 + 15 * ln}" text-anchor="middle" '
                       f'fill="currentColor" font-size="12">{esc(line)}</text>')
    out.append(f'<text x="{margin}" y="{y_mid + 5}" fill="currentColor" font-size="13" font-style="italic">{esc(input_label)}</text>')
    out.append(f'<text x="{width - margin}" y="{y_mid + 5}" text-anchor="end" fill="currentColor" '
               f'font-size="13" font-style="italic">{esc(output_label)}</text>')
    # spans (brackets)
    for r, (label, a, b) in enumerate(spans):
        y0 = span_top + 26 * r
        x0, x1 = left(a), right(b)
        out.append(f'<path d="M{x0},{y0 - 6} L{x0},{y0} L{x1},{y0} L{x1},{y0 - 6}" stroke="#009E73" '
                   f'stroke-width="2" fill="none"/>')
        out.append(f'<text x="{(x0 + x1) / 2}" y="{y0 + 14}" text-anchor="middle" fill="currentColor" '
                   f'font-size="12">{esc(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


#: Fills of the K24 layer diagram's blocks and ⊕ nodes (light in both colour schemes) and their label colour.
BOX_FILLS = ("#eef3f8", "#ffffff")
BOX_TEXT = "#222222"
_NODE_LABELS = {"RES": "⊕", "LN1": "LN₁", "LN2": "LN₂", "LNA": "LN", "LNF": "LN", "LN2(x)": "LN₂(x)"}
"""Box labels; a sandwich layer's norms on the attention and FF outputs are plain "LN" (their place
in the chain says which), a parallel layer's FF norm reads the layer input x."""


def diagram_nodes(layout: schema.Layout) -> dict:
    """A layout as diagram data: ``nodes`` (label, kind) with the input ``x`` and output ``y`` at the
    ends, residual ``skips`` (from node, to node) and ``scopes`` (after node, scope), all derived from
    `schema.Layout.blocks` and ``scopes``.

    Each residual addition closes a sub-block; post-LN (``norm_first`` False) closes it after the norm
    that follows the addition. A skip starts at the node before its sub-block and ends at its ⊕; each
    scope's marker sits after the block `schema.Layout.scope_block_indexes` names.
    """
    blocks = layout.blocks
    nodes = [("x", "io")] + [(_NODE_LABELS.get(b, b), "add" if b == "RES" else "box") for b in blocks] + [("y", "io")]
    ends, k = [], 0
    while k < len(blocks):
        if blocks[k] == "RES":
            end = k + 1 if not layout.norm_first and k + 1 < len(blocks) and blocks[k + 1].startswith("LN") else k
            ends.append((k + 1, end + 1))  # (⊕ node, last node of the sub-block), node = block index + 1
            k = end + 1
        else:
            k += 1
    skips, start = [], 0
    for add, last in ends:
        skips.append((start, add))
        start = last
    scopes = [(k + 1, s) for k, s in zip(layout.scope_block_indexes(), layout.scopes)]
    return dict(nodes=nodes, skips=skips, scopes=scopes)


def layer_diagram(layout: schema.Layout, title: str, width: int | None = None, height: int = 130) -> alt.LayerChart:
    """A layer of the given layout as boxes and arrows, with a dashed marker after each K24 scope
    (default width: 620 px for up to six blocks, wider for longer layers so scope labels do not collide)."""
    d = diagram_nodes(layout)
    if width is None:
        width = 620 if len(d["nodes"]) <= 8 else 84 * len(d["nodes"])
    step = 1.5
    nodes = pd.DataFrame([dict(k=k, label=lab, kind=kind, x0=k * step, x1=k * step + 1.0, xc=k * step + 0.5)
                          for k, (lab, kind) in enumerate(d["nodes"])])
    boxes = nodes[nodes.kind != "io"].assign(y0=0.2, y1=0.8)
    boxes.loc[boxes.kind == "add", ["x0", "x1"]] = boxes.loc[boxes.kind == "add", ["xc"]].values + [[-0.25, 0.25]]
    boxes.loc[boxes.kind == "add", ["y0", "y1"]] = [[0.3, 0.7]]
    edge_rows = []
    for k in range(len(nodes) - 1):
        a, b = nodes.iloc[k], nodes.iloc[k + 1]
        x_start = a.x1 if a.kind == "box" else (a.xc + 0.25 if a.kind == "add" else a.xc + 0.2)
        x_end = b.x0 if b.kind == "box" else (b.xc - 0.25 if b.kind == "add" else b.xc - 0.2)
        edge_rows.append(dict(edge=f"e{k}", order=0, x=x_start, y=0.5))
        edge_rows.append(dict(edge=f"e{k}", order=1, x=x_end, y=0.5))
    for q, (s, t) in enumerate(d["skips"]):
        xs = nodes.iloc[s].x1 + 0.25 if nodes.iloc[s].kind != "io" else nodes.iloc[s].xc + 0.3
        xt = nodes.iloc[t].xc
        for o, (x, y) in enumerate([(xs, 0.5), (xs, 1.15), (xt, 1.15), (xt, 0.7)]):
            edge_rows.append(dict(edge=f"s{q}", order=o, x=x, y=y))
    edges = pd.DataFrame(edge_rows)
    scope_rows = [dict(scope=s, label=s, x=nodes.iloc[k].x1 + 0.25, y0=-0.25, y1=1.0) for k, s in d["scopes"]]
    scopes = pd.DataFrame(scope_rows)
    xdom = [-0.2, nodes.x1.max() + 0.2]
    X = lambda f: alt.X(f, scale=alt.Scale(domain=xdom), axis=None)  # noqa: E731
    Y = lambda f: alt.Y(f, scale=alt.Scale(domain=[-0.55, 1.35]), axis=None)  # noqa: E731
    base_props = dict(width=width, height=height)
    rect = alt.Chart(inline_data(boxes)).mark_rect(stroke="#555", strokeWidth=1, cornerRadius=3).encode(
        x=X("x0:Q"), x2="x1:Q", y=Y("y0:Q"), y2="y1:Q",
        color=alt.Color("kind:N", scale=alt.Scale(domain=["box", "add"], range=list(BOX_FILLS)),
                        legend=None))
    # a label inside a (light) box is dark in either colour scheme; "x" and "y" stand on the page and
    # take its text colour (the dark scheme's light text would vanish on a light box)
    inside = nodes[nodes.kind != "io"].assign(y=0.5)
    text = alt.Chart(inline_data(inside)).mark_text(fontSize=13, color=BOX_TEXT).encode(
        x=X("xc:Q"), y=Y("y:Q"), text="label:N")
    io_text = alt.Chart(inline_data(nodes[nodes.kind == "io"].assign(y=0.5))).mark_text(fontSize=13).encode(
        x=X("xc:Q"), y=Y("y:Q"), text="label:N")
    lines = alt.Chart(inline_data(edges)).mark_line(color="#555", strokeWidth=1.2).encode(
        x=X("x:Q"), y=Y("y:Q"), detail="edge:N", order="order:Q")
    heads = alt.Chart(inline_data(edges[edges.order == edges.groupby("edge").order.transform("max")])).mark_point(
        shape="triangle-right", size=40, filled=True, color="#555").encode(x=X("x:Q"), y=Y("y:Q"))
    rules = alt.Chart(inline_data(scopes)).mark_rule(strokeDash=[4, 3], color=theme.CATEGORICAL[3]).encode(
        x=X("x:Q"), y=Y("y0:Q"), y2="y1:Q")
    labels = alt.Chart(inline_data(scopes)).mark_text(fontSize=theme.FONT_SIZE, color=theme.CATEGORICAL[3], dy=8, baseline="top").encode(
        x=X("x:Q"), y=Y("y0:Q"), text="label:N")
    return alt.layer(lines, heads, rect, text, io_text, rules, labels).properties(title=title, **base_props)
