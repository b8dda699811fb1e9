"""The notebook's pictures: `plot_map` (one Altair heatmap) and `MapView`, the inline interactive view.

`MapView` is what Jupyter shows for a `Decomposition` or a `SequenceResult` (``_repr_html_``): the
site's map explorer (`figures.charts.token_maps.map_explorer`: layer slider, scope/method selector,
example selector, the site's theme and colours) over every decomposed map, with token labels in
their display form (`report_builder.tokens`). The HTML is self-contained and offline: the vendored
Vega/Vega-Lite/Vega-Embed bundle (`site.assets.vega_bundle`, the site's copy) is inlined gzip-
compressed (about 0.4 MB instead of 0.9 MB) and unpacked by the browser's ``DecompressionStream``,
once per page; nothing is fetched, so a saved ``.ipynb`` or ``.html`` shows the chart anywhere a script runs.
Where none does (GitHub, an untrusted notebook), the view's element says what it holds and how to see it.

`Decomposition.plot`'s Altair chart draws itself the same way (`offline`): Altair's own Jupyter renderer
fetches Vega from a CDN, which an offline notebook cannot reach; its ``.save("x.html")`` inlines Vega too.
Neither changes the user's Altair settings: the report's theme is active only while a spec is made.

Pitfall: token strings are untrusted: the spec goes into the page as JSON with ``<``, ``>`` and
``&`` escaped, inside a ``<script type="application/json">`` element that is never executed.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import html
import itertools
import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from report_builder import schema, tokens as tok
from report_builder.notebook.units import unit_label

if TYPE_CHECKING:  # pragma: no cover
    import altair as alt

_COUNTER = itertools.count()


def display_tokens(res: "Decomposition") -> list[list[str]]:
    """Each sequence's tokens in display form (the tokenizer style judged once from all of them)."""
    style = tok.token_style(t for s in res.sequences for t in s.tokens)
    return [tok.display_tokens(s.tokens, style, causal=res.causal, positions=range(len(s))) for s in res.sequences]


VIEW_CELLS = 400_000
"""Most map cells one inline view carries (about 3 MB of JSON); beyond it the view keeps the first
sequence shown, then the first map shown, then cuts tokens (and its title says so); `plot_map` cuts tokens alike."""


def _maps(res: "Decomposition", names: list[str], seqs: list[int], layers: list[int], unit: str,
          max_tokens: int | None = None) -> pd.DataFrame:
    """Map rows ``example, layer, scope, i, j, token_i, token_j, value`` with display tokens and a
    0-based ``layer`` (the figure builders read result tables, which count from 0)."""
    import numpy as np

    from report_builder.stats.maps import row_normalise, valid_pairs_mask

    shown = display_tokens(res)
    parts = []
    for k in seqs:
        s = res.sequences[k]
        n = min(len(s), max_tokens or len(s))
        ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        valid = valid_pairs_mask(n, res.causal)
        toks = np.asarray(shown[k][:n], dtype=object)
        for layer in layers:
            for name in names:
                m = s.maps[layer][name].float().cpu().numpy()
                if unit == schema.ROW_NORMALISED:
                    m = row_normalise(m)
                m = m[:n, :n]
                parts.append(pd.DataFrame({
                    "example": res.example_name(k), "layer": layer - schema.FIRST_LAYER, "scope": name,
                    "i": ii[valid], "j": jj[valid], "token_i": toks[ii[valid]], "token_j": toks[jj[valid]],
                    "value": m[valid].astype("float32")}))
    return pd.concat(parts, ignore_index=True)


def plot_map(res: "Decomposition", layer: int, name: str, seq: int, unit: str, size: int) -> "alt.Chart":
    """`Decomposition.plot`: one map as a heatmap titled ``"<model>, <name> (<unit label>), layer <layer>"``; a
    map over `VIEW_CELLS` cells keeps its first tokens (the title says how many of how many)."""
    from report_builder.figures.charts.token_maps import token_map_heatmap  # render side, imported lazily

    n = len(res[seq])
    max_tokens = int(VIEW_CELLS ** 0.5) if n * n > VIEW_CELLS else None  # the view's rule: one chart stays drawable
    cut = f"; first {max_tokens} of {n} tokens" if max_tokens else ""
    panel = f"{name} ({unit_label(unit, [name])}{cut})"
    df = _maps(res, [name], [seq], [layer], unit, max_tokens).assign(scope=panel)
    return offline(token_map_heatmap(df, panel="scope", panel_order=[panel], slider=False, size=size,
                                     label=f"{res.model}, "))


def _spec(chart) -> dict:
    """A chart's Vega-Lite dict in the report's theme, without its schema URL (the page needs none)."""
    from report_builder.site.figure_files import chart_to_spec

    spec = chart_to_spec(chart)  # in the report's theme (`figures.theme.active`), the user's own kept
    spec.pop("$schema", None)
    return spec


class _Offline:
    """Mixed into an Altair chart's own class by `offline`: Jupyter shows it through `MapView` (Vega inlined,
    nothing fetched), and ``save`` inlines Vega into an HTML file unless told ``inline=False``."""

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        spec = _spec(self)
        text = _title(spec) or "chart"
        return {"text/html": MapView(spec, text)._repr_html_(), "text/plain": f"<chart: {text}>"}

    def save(self, fp, format=None, **kw):
        from report_builder.figures import theme

        kw.setdefault("inline", True)
        with theme.active():  # the report's theme for this file, the user's own kept
            return super().save(fp, format, **kw)


def _title(spec: dict) -> str | None:
    """The first title of a spec or of its sub-charts (concatenated, layered), as text."""
    t = spec.get("title")
    t = t.get("text") if isinstance(t, dict) else t
    if t:
        return " ".join(map(str, t)) if isinstance(t, list) else str(t)
    subs = (c for key in ("vconcat", "hconcat", "concat", "layer") for c in spec.get(key, ()))
    return next(filter(None, (_title(c) for c in subs if isinstance(c, dict))), None)


@lru_cache(maxsize=None)
def _offline_class(base: type) -> type:
    """``base`` (an Altair chart class) with `_Offline` mixed in: copies (``.properties(...)``) keep it."""
    cls = type(base.__name__, (_Offline, base), {"__module__": __name__, "__qualname__": f"_offline_{base.__name__}"})
    globals()[cls.__qualname__] = cls  # found by name: a chart of it pickles
    return cls


def offline(chart):
    """``chart`` itself, its class turned into `_offline_class` of it (Altair's ``__setattr__`` keeps every
    other attribute in the spec, hence ``object.__setattr__``)."""
    object.__setattr__(chart, "__class__", _offline_class(type(chart)))
    return chart


def map_view(res: "Decomposition", layer: int, name: str, seq: int, unit: str) -> "MapView":
    """`Decomposition.show`: every decomposed map of every sequence, starting at (layer, name, seq)."""
    from report_builder.figures.charts.token_maps import map_explorer

    names, seqs, layers = list(res.scopes + res.methods), list(range(len(res))), list(res.layers)

    def cells() -> int:
        return sum(len(res[k]) ** 2 for k in seqs) * len(layers) * len(names)

    cut, max_tokens = [], None
    if cells() > VIEW_CELLS and len(seqs) > 1:
        seqs, cut = [seq], cut + [f"text {seq + 1} of {len(res)} only"]
    if cells() > VIEW_CELLS and len(names) > 1:
        names, cut = [name], cut + [f"{name} only"]
    if cells() > VIEW_CELLS:
        max_tokens = int((VIEW_CELLS / len(layers)) ** 0.5)
        cut.append(f"first {max_tokens} of {len(res[seq])} tokens")
    title = f"{res.model} ({'; '.join(cut)}: too large for one view)" if cut else res.model
    df = _maps(res, names, seqs, layers, unit, max_tokens)
    chart = map_explorer(df, names, title, key="nb", value_title=unit_label(unit, names),
                         start=(layer, name, schema.example_order(df["example"].unique()).index(res.example_name(seq))))
    return MapView(_spec(chart), f"{res.model}: {name}, layer {layer} ({unit_label(unit, [name])})")


@lru_cache(maxsize=1)
def _packed_bundle() -> str:
    """The vendored Vega bundle, gzip-compressed (reproducibly: no time stamp), base64-encoded."""
    from report_builder.site.assets import vega_bundle

    return base64.b64encode(gzip.compress(vega_bundle().encode("utf-8"), 9, mtime=0)).decode("ascii")


def _json_for_html(obj) -> str:
    """JSON safe inside an HTML element: ``<``, ``>``, ``&`` (and the JS line separators) escaped."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


_LOADER = """(function () {
  var el = document.getElementById("%(id)s");
  var spec = JSON.parse(document.getElementById("%(id)s-spec").textContent);
  function fail(e) { el.textContent = "report_builder: the map could not be drawn (" + e + ")"; console.error(e); }
  function draw() { el.textContent = ""; return window.vegaEmbed(el, spec, {actions: false, renderer: "svg"}).catch(fail); }
  if (!window.rbVega) {
    window.rbVega = window.vegaEmbed ? Promise.resolve() : (function () {
      var raw = atob(document.getElementById("%(id)s-vega").textContent.trim());
      var bytes = new Uint8Array(raw.length);
      for (var k = 0; k < raw.length; k++) bytes[k] = raw.charCodeAt(k);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      return new Response(stream).text().then(function (js) { if (!window.vegaEmbed) (0, eval)(js); });
    })();
  }
  window.rbVega.then(draw, fail);
})();"""


_NO_SCRIPT = (": an interactive map that its script draws here, which has not run (a saved notebook shown by a "
              "viewer that runs no script, or not trusted): run the cell, or trust the notebook, to see it; "
              "<code>.save(\"map.html\")</code> writes it as a page for any browser.")
"""The line a view's element holds until its script draws the map (GitHub and an untrusted notebook drop every
``<script>``, which left an empty element): what is shown, and how to see it."""


class MapView:
    """An interactive, offline map view: renders itself in Jupyter (``_repr_html_``).

    Attributes:
        spec: The Vega-Lite spec (a dict), as the site's map explorer builds it.
        title: What the view shows first, in words.
    """

    def __init__(self, spec: dict, title: str):
        self.spec = spec
        self.title = title

    def __repr__(self) -> str:
        return f"<MapView: {self.title}>"

    def _repr_html_(self) -> str:
        digest = hashlib.sha256(json.dumps(self.spec, sort_keys=True).encode()).hexdigest()[:12]
        vid = f"rb-view-{digest}-{next(_COUNTER)}"
        return (f'<div class="rb-view" id="{vid}" title="{html.escape(self.title)}" '
                f'style="font: 13px system-ui, sans-serif">{html.escape(self.title)}{_NO_SCRIPT}</div>\n'
                f'<script type="application/json" id="{vid}-spec">{_json_for_html(self.spec)}</script>\n'
                f'<script type="text/plain" id="{vid}-vega">{_packed_bundle()}</script>\n'
                f"<script>{_LOADER % {'id': vid}}</script>\n")

    def save(self, path: str | Path) -> Path:
        """Write the view as a standalone, offline HTML page; returns the path."""
        p = Path(path)
        p.write_text(f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(self.title)}'
                     f"</title></head><body>\n{self._repr_html_()}</body></html>\n", encoding="utf-8")
        return p
