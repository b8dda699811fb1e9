"""Per-figure files under ``figures/<id>/``: spec.json, data.csv, chart.svg, chart.png, data-<hash>.json.

``spec.json`` is the self-contained Vega-Lite spec (data inline). The spec placed on the page keeps
small datasets inline and points large ones (over ``inline_limit`` bytes of JSON) at content-hashed
``data-<hash>.json`` files by relative URL, so pages stay light when served over HTTP (`site.spec_data`).

Every published number goes through the precision rule (`precision`): ``data.csv`` and
``paper_vs_ours.csv`` by `citations.version_files.csv_text`, the spec (hence ``chart.svg``/``.png``)
by `spec_data.published_spec`.
A figure whose new files equal its current published version within that precision keeps the version
(`same_figure`: ``write_figure_files(previous=...)``), so float noise never makes a new permalink.
Pitfall: Altair numbers its parameters/views per process (``param_7``); names are renumbered in
order of appearance so the content hash is stable across builds.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import vl_convert as vlc

from report_builder import atomic, guard, schema
from report_builder.citations.version_files import version_hash, write_csv
from report_builder.site import svgsafe
from report_builder.site.figure_cache import RENDER_ENTRY
from report_builder.site.htmltable import table_spec
from report_builder.citations import readback, same_version
from report_builder.site.spec_data import externalise, published_spec, sha  # noqa: F401 - sha

DEFAULT_INLINE_LIMIT = 200_000  # bytes of JSON data kept inline in a page


@dataclass
class FigureFiles:
    """What was written for one figure (paths relative to the site root)."""

    content_hash: str
    page_spec: dict[str, Any] | None
    files: dict[str, str]  # kind -> relative path (svg, png, csv, json, data-*)
    reused: bool = False  # chart.svg/png taken from the render cache (same content hash)
    kept: bool = False  # equal within the published precision to ``previous``: its files and hash kept


def _canonical_names(text: str) -> str:
    seen: dict[str, dict[str, str]] = {p: {} for p in ("param", "view", "concat", "layer")}

    def repl(m: re.Match) -> str:  # one pass; each prefix numbered in its own order of appearance
        names = seen[m.group(1)]
        return names.setdefault(m.group(0), f"{m.group(1)}_{len(names) + 1}")

    return _NAME_RE.sub(repl, text)


_NAME_RE = re.compile(r"\b(param|view|concat|layer)_\d+\b")


def chart_to_spec(chart: Any) -> dict[str, Any]:
    """An Altair chart (or a ready Vega-Lite dict) as a plain, canonical Vega-Lite dict."""
    if isinstance(chart, dict):
        spec = copy.deepcopy(chart)
    else:
        import altair as alt

        from report_builder.figures import theme

        with theme.active(), alt.data_transformers.enable("default", max_rows=None):
            spec = chart.to_dict()
    return json.loads(_canonical_names(json.dumps(spec, sort_keys=True)))


def export_title(title: str, fig_id: str, models: tuple[str, ...] = (), datasets: tuple[str, ...] = (),
                 dataset_names: dict[str, str] | None = None) -> dict[str, Any]:
    """The title of a static export: what it shows, which models and data, and its permanent id.

    Layers and scopes are named by the chart itself (panel headers), where they apply.
    """
    names = dataset_names or {}
    sub = []
    if models:
        sub.append(("Model: " if len(models) == 1 else "Models: ") + ", ".join(models))
    if datasets:
        sub.append("Data: " + "; ".join(f"{d} = {names[d]}" if names.get(d) and names[d] != d else d
                                        for d in datasets))
    sub.append(f"report_builder figure {fig_id}")
    return {"text": title, "subtitle": sub}


def export_spec(chart: Any | None, table: pd.DataFrame | None, title: dict[str, Any] | None = None) -> dict[str, Any]:
    """The self-contained Vega-Lite spec written to ``spec.json`` and drawn as ``chart.svg``/``.png``.

    ``title`` (see `export_title`) becomes the spec's title unless the chart carries its own.
    """
    if chart is not None:
        spec = chart_to_spec(chart)
        if title and "title" not in spec:
            spec["title"] = title
    else:
        spec = table_spec(table, title=title)
    # exported files are read on any background (a paper, a dark viewer): opaque white
    spec.setdefault("config", {})["background"] = "white"
    return published_spec(spec)


def csv_frame(data: pd.DataFrame, units: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The frame written as ``data.csv`` (SPEC §8), so that it stands alone: result tables keep 0-based
    layers, the CSV shows them 1-based (``layer = 1`` is the first layer), like every chart, reading and
    table of the site; each column of ``units`` (the figure's `FigureSpec.units`) is named with its unit,
    ``value (%)``, ``value (row-normalised)`` (`schema.unit_columns`). Both are the transformations
    `notebook.load_results` and the notebook's frames apply, so those frames join ``data.csv`` as they are."""
    return schema.unit_columns(schema.user_layers(data), units or {})


def write_figure_files(fig_id: str, data: pd.DataFrame, chart: Any | None, table: pd.DataFrame | None,
                       figures_dir: Path, inline_limit: int = DEFAULT_INLINE_LIMIT,
                       title: dict[str, Any] | None = None, svg: str | None = None,
                       render_cache: "RenderCache | None" = None,
                       units: Mapping[str, str] | None = None, previous: "Previous | None" = None) -> FigureFiles:
    """Write every file of one figure and return its content hash and the spec for the page.

    Args:
        fig_id: permanent figure id (the folder name).
        data: the tidy frame behind the figure (written as ``data.csv``).
        chart: an Altair chart / Vega-Lite dict, or ``None`` for a pure table.
        table: the frame shown for tables (rendered as a text-mark chart when ``chart`` is None).
        figures_dir: ``<docs>/figures``; files go to ``figures_dir/<fig_id>/``.
        inline_limit: datasets with more JSON bytes than this are written to files.
        title: the static export's title (`export_title`); not repeated on the page.
        svg: a drawn diagram (standalone SVG markup): written as ``chart.svg``/``chart.png`` instead of
            the table's rendering (``spec.json`` still draws the table of its parts).
        render_cache: where ``chart.svg``/``chart.png`` of an unchanged content hash are reused from
            instead of drawing them again (`FigureFiles.reused` says which happened).
        units: column -> unit of ``data`` (`FigureSpec.units`): named in ``data.csv``'s header (`csv_frame`).
        previous: the figure's current published version (`Previous`, verified intact by the caller):
            when this build's files equal it within the published precision (`same_figure`), its
            ``data.csv``, ``spec.json``, ``chart.svg`` and ``chart.png`` are written instead and its
            content hash kept (`FigureFiles.kept`): float noise makes no new version.
    """
    fig_dir = figures_dir / fig_id
    fig_dir.mkdir(parents=True, exist_ok=True)
    rel = f"figures/{fig_id}"
    files: dict[str, str] = {}

    csv = write_csv(csv_frame(data, units), fig_dir / "data.csv")
    files["csv"] = f"{rel}/data.csv"

    spec = export_spec(chart, table if table is not None else data, title)
    on_page = chart is not None
    spec_text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    if len(spec_text) < inline_limit:
        spec_text = json.dumps(spec, sort_keys=True, indent=1)  # readable when small
    (fig_dir / "spec.json").write_text(spec_text, encoding="utf-8")
    files["json"] = f"{rel}/spec.json"

    content_hash = version_hash(spec_text, csv, svg)
    kept = False
    if previous is not None and previous.hash != content_hash and same_figure(previous, spec_text, csv, svg):
        kept = previous.carry_into(fig_dir)
        if not kept:  # carried in part: drop what came (links to published files, never written) and
            for name in CARRIED:  # write this build's own texts again
                (fig_dir / name).unlink(missing_ok=True)
            (fig_dir / "data.csv").write_text(csv, encoding="utf-8")
            (fig_dir / "spec.json").write_text(spec_text, encoding="utf-8")
    if kept:
        spec_text = (fig_dir / "spec.json").read_text(encoding="utf-8")
        spec = json.loads(spec_text)
        content_hash = version_hash(spec_text, (fig_dir / "data.csv").read_text(encoding="utf-8"), svg)
    # a kept version's drawings were carried with it (hard links to the published files: never written again)
    cached = None if kept or render_cache is None else render_cache.get(content_hash)
    if cached is not None:
        (fig_dir / "chart.svg").write_bytes(cached[0])
        (fig_dir / "chart.png").write_bytes(cached[1])
    elif not kept:
        drawn = svg if svg is not None else vlc.vegalite_to_svg(spec)
        (fig_dir / "chart.svg").write_text(drawn, encoding="utf-8")
        drawn = (fig_dir / "chart.svg").read_text(encoding="utf-8")
        (fig_dir / "chart.png").write_bytes(vlc.svg_to_png(drawn, scale=2))  # same pixels, no second Vega run
        if render_cache is not None:
            render_cache.put(content_hash, (fig_dir / "chart.svg").read_bytes(), (fig_dir / "chart.png").read_bytes())
    files["svg"] = f"{rel}/chart.svg"
    files["png"] = f"{rel}/chart.png"

    page_spec = externalise(spec, fig_dir, rel, inline_limit, files) if on_page else None
    if page_spec is not None and title is not None and page_spec.get("title") == title:
        del page_spec["title"]  # the page's heading and caption say it
    return FigureFiles(content_hash=content_hash, page_spec=page_spec, files=files,
                       reused=kept or cached is not None, kept=kept)


CARRIED = ("data.csv", "spec.json", "chart.svg", "chart.png")
"""The files of a version kept within the published precision (`Previous.carry_into`), in carrying order."""


@dataclass(frozen=True)
class Previous:
    """A figure's current version in the earlier site, as the build found it intact: the site, the
    version's permalink and the SHA-256 of its files (`citations.earlier_site.Version`)."""

    site: Path
    permalink: str
    files: dict[str, str]

    @property
    def hash(self) -> str:
        return Path(self.permalink).name

    def text(self, name: str) -> str:
        """A file of the version, read bounded with no link followed (`readback`), checked against its
        recorded SHA-256."""
        data = readback.read_bytes(self.site, self.permalink + name, readback.CAPS["file"])
        if hashlib.sha256(data).hexdigest() != self.files.get(name):
            raise ValueError(f"{self.permalink}{name} is not the file its index records")
        return data.decode("utf-8")

    def carry_into(self, fig_dir: Path, names: tuple[str, ...] = CARRIED) -> bool:
        """The version's files ``names`` (its data.csv, spec.json and charts) into ``fig_dir``, each carried
        only with its recorded SHA-256 (`earlier_site.carry`); False (nothing kept) when one cannot be."""
        from report_builder.citations import earlier_site

        return all(earlier_site.carry(self.site, self.permalink + name, fig_dir, name, self.files.get(name))
                   is not None for name in names)


def same_figure(previous: Previous, spec_text: str, csv: str, svg: str | None) -> bool:
    """Whether this build's figure (its ``spec.json`` and ``data.csv`` texts, its drawn ``svg``) equals the
    published version ``previous`` within the published precision (`citations.same_version`). The
    version's files are read bounded (`Previous.text`); anything unreadable counts as different (a new
    version is made)."""
    old: dict[str, str] = {}
    try:
        for name in ("spec.json", "data.csv") + (("chart.svg",) if svg is not None else ()):
            old[name] = previous.text(name)
    except (OSError, ValueError, readback.BadRecord):
        return False
    return same_version.same_content(old, {"spec.json": spec_text, "data.csv": csv,
                                           **({"chart.svg": svg} if svg is not None else {})})


class RenderCache:
    """The drawn ``chart.svg``/``chart.png`` of earlier builds, keyed by the figure's content hash and the
    renderer's version, in the output's state folder (``<state>/figure-renders``, `site_state`).

    The content hash covers the whole spec and data, so a hit gives the same bytes a new drawing would.
    Each entry records the SHA-256 of its two files under an HMAC with the state's secret; an entry that
    does not verify (edited, truncated, planted, another key) or whose drawing holds more than charts
    draw (`svgsafe.is_safe`: a script, a link; whatever the HMAC says) is ignored and drawn again, and
    without a secret nothing is reused or stored. `prune` keeps only the entries the latest build used.
    """

    def __init__(self, root: Path, secret: bytes | None = None) -> None:
        self.root = Path(root)
        self.secret = secret
        self.used: set[str] = set()
        self.hits = 0

    def _dir(self, content_hash: str) -> Path:
        return self.root / f"{content_hash}-vl{vlc.__version__}"

    def get(self, content_hash: str) -> tuple[bytes, bytes] | None:
        from report_builder.site.site_state import verify

        d = self._dir(content_hash)
        if d.is_symlink():
            return None
        try:  # regular files only: a link, FIFO or device is never read
            meta = json.loads(atomic.read_inside(d, d / "meta.json", 1 << 16))
            svg = atomic.read_inside(d, d / "chart.svg", svgsafe.MAX_BYTES)
            png = atomic.read_inside(d, d / "chart.png", 1 << 30)
        except (OSError, ValueError, RecursionError, guard.UnsafeOutput):
            return None
        s, p = hashlib.sha256(svg).hexdigest(), hashlib.sha256(png).hexdigest()
        if not isinstance(meta, dict) or meta.get("svg") != s or meta.get("png") != p or not verify(
                self.secret, meta.get("mac"), d.name, s, p) or not svgsafe.is_safe(svg):
            return None
        self.used.add(d.name)
        self.hits += 1
        return svg, png

    def keep(self, content_hash: str) -> None:
        """Keep the entry of ``content_hash`` (if any) through `prune`: its figure was reused whole."""
        d = self._dir(content_hash)
        if d.is_dir():
            self.used.add(d.name)

    def put(self, content_hash: str, svg: bytes, png: bytes) -> None:
        from report_builder.site.site_state import mac

        if self.secret is None:
            return
        d = self._dir(content_hash)
        tmp = self.root / f".{d.name}.tmp-{guard.tmp_tag()}"
        try:
            tmp.mkdir(parents=True, exist_ok=True)
            (tmp / "chart.svg").write_bytes(svg)
            (tmp / "chart.png").write_bytes(png)
            sums = {"svg": hashlib.sha256(svg).hexdigest(), "png": hashlib.sha256(png).hexdigest()}
            sums["mac"] = mac(self.secret, d.name, sums["svg"], sums["png"])
            (tmp / "meta.json").write_text(json.dumps(sums), encoding="utf-8")
            if d.exists():
                shutil.rmtree(d)
            os.rename(tmp, d)
            self.used.add(d.name)
        except OSError:  # a cache that cannot be written only costs time
            shutil.rmtree(tmp, ignore_errors=True)

    def prune(self) -> None:
        """Remove the entries this build did not use (only folders named like ours) and the temporary
        folders of processes that are gone."""
        if not self.root.is_dir():
            return
        for d in self.root.iterdir():
            if d.is_dir() and d.name not in self.used and RENDER_ENTRY.fullmatch(d.name):
                shutil.rmtree(d, ignore_errors=True)
        guard.sweep([self.root], legacy_age_s=None)
