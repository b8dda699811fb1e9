"""Jinja rendering of the Markdown pages (Home, K21, K24, Methods, Models & data, Changes, Cite).

Templates live in the top-level ``templates/``, hand-written prose in ``docs/`` (both found by
`site.paths`); the prose is pulled in with ``{{ handwritten("methods.md") }}`` (LaTeX converted to
MathML on the way). Pitfall: every raw HTML block is emitted on its own lines with blank lines
around it, or Markdown would wrap or mangle it.
"""
from __future__ import annotations

import html
import json
import re
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from report_builder.stats import headlines
from report_builder.site import htmltable, mathml, svgsafe
from report_builder.site.paths import HANDWRITTEN_DOCS, TEMPLATES_DIR

def environment() -> jinja2.Environment:
    """The page templates' Jinja environment: HTML autoescape on for every value.

    Trusted HTML built by our own code (tables, cards, provenance, the hand-written pages) is passed
    as `markupsafe.Markup` or marked ``| safe`` in the template; every other value is escaped. Text
    from data, models or config placed in Markdown goes through ``| md`` (`md_escape`).
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=True,
    )
    env.globals["handwritten"] = lambda name: Markup(handwritten(name))
    env.filters["table"] = lambda df, *a, **k: Markup(htmltable.to_html(df, *a, **k))
    env.filters["fmt"] = htmltable.fmt
    env.filters["md"] = lambda text: Markup(md_escape(text))
    env.filters["named"] = named_caption
    return env


ROLE_WORDS = (("primary encoder", "primary_encoder"), ("primary causal model", "primary_causal"))
"""Words of a figure's caption that name a role, and the `Roles` field naming its model (`named_caption`)."""


def named_caption(caption: str, roles: Any) -> Markup:
    """A figure's caption (trusted, from its declaration) for the page, each role it names followed by the
    model that plays it in this build: "Primary encoder (MiniLM-L6) on the primary …" (the first time
    each role is named; the model's name Markdown-escaped)."""
    out = str(html.escape(str(caption), quote=False))
    for words, attr in ROLE_WORDS:
        name = getattr(roles, attr, None)
        m = re.search(re.escape(words), out, re.I) if name else None
        if m:
            out = f"{out[:m.end()]} ({md_escape(name)}){out[m.end():]}"
    return Markup(out)


# characters Python-Markdown (and the tables extension) let a backslash escape
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|])")


def md_escape(text: Any) -> str:
    """Untrusted text (dataset text, model or dataset names) for a Markdown context: HTML special
    characters as entities, Markdown punctuation backslash-escaped (no links, emphasis, attribute
    lists or table cells can be formed), line breaks as spaces (no new block can start)."""
    s = " ".join(str(text).split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(s, quote=False))


def handwritten(name: str) -> str:
    """A hand-written Markdown fragment from ``docs/`` with its formulas as MathML ('' if absent)."""
    path = HANDWRITTEN_DOCS / name
    if not path.is_file():
        return ""
    return mathml.convert_markdown(path.read_text(encoding="utf-8"))


def spec_attr(spec: dict[str, Any]) -> str:
    """A Vega-Lite spec as an escaped HTML attribute value."""
    return html.escape(json.dumps(spec, separators=(",", ":")), quote=True)


# ---------------------------------------------------------------- headline numbers (Home page)


def headline_mixing(tables: dict[str, pd.DataFrame], roles) -> list[dict[str, Any]]:
    """Mean mixing ratio per method for the primary encoder on the primary dataset (`headlines.home_mixing`)."""
    model = roles.primary_encoder or (roles.encoders[0] if roles.encoders else None)
    return headlines.home_mixing(tables, model, roles.datasets)


def headline_cancellation(tables: dict[str, pd.DataFrame], roles) -> list[dict[str, Any]]:
    """Mean change through FF alone vs cumulative change over the whole layer, for the primary
    encoder and the primary causal model on the primary dataset (every model if none is primary);
    see `headlines.home_cancellation`."""
    primary = [m for m in (roles.primary_encoder, roles.primary_causal) if m]
    return headlines.home_cancellation(tables, primary, roles.datasets)


# ---------------------------------------------------------------- Methods and Models & data


def recon_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
    """Max relative reconstruction error per (model, layer) with one column per scope."""
    rec = tables.get("recon_errors")
    if rec is None or rec.empty:
        return None
    g = rec.groupby(["model", "layer", "scope"], sort=False)["max_rel_error"].max().reset_index()
    scopes = list(dict.fromkeys(g["scope"]))
    wide = g.pivot_table(index=["model", "layer"], columns="scope", values="max_rel_error", aggfunc="max")
    wide = wide[[s for s in scopes if s in wide.columns]].reset_index()
    wide.columns.name = None
    return wide


def recon_summary(tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
    rec = tables.get("recon_errors")
    if rec is None or rec.empty:
        return None
    s = rec.groupby("model", sort=False).agg(
        layers=("layer", "nunique"), scopes=("scope", "nunique"), max_rel_error=("max_rel_error", "max"))
    return s.reset_index()


MODEL_FIELDS = [
    ("source", "Source"), ("class_name", "Class"), ("family", "Family"), ("ln_position", "LN position"),
    ("norm", "Norm"), ("activation", "Activation"), ("gated", "Gated FF"), ("d_model", "d"),
    ("layers", "Layers"), ("heads", "Heads"), ("kv_heads", "KV heads"), ("ff_size", "FF size"),
    ("params", "Parameters"), ("revision", "Revision (requested)"), ("snapshot", "Hub snapshot"),
    ("fingerprint", "Fingerprint"), ("dtype", "dtype"), ("device", "Device"),
    ("multipliers", "Multipliers"), ("licence", "Licence"),
]
DATA_FIELDS = [
    ("name", "Name"), ("domain", "Domain"), ("source", "Source"), ("licence", "Licence"),
    ("n_samples", "Samples"), ("hash", "Hash"), ("built", "Built"),
]


def _card(title: str, rows: list[tuple[str, str]], anchor: str) -> str:
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in rows)
    return (f'<div class="rb-card" id="{html.escape(anchor)}"><h3>{html.escape(title)}</h3>'
            f"<table class=\"rb-table rb-kv\"><tbody>{body}</tbody></table></div>")


def _val(key: str, value: Any) -> str:
    if key == "params" and isinstance(value, (int, float)) and value == value:
        return f"{value / 1e6:.1f} M"
    text = html.escape(htmltable.fmt(value))
    return f"<code>{text}</code>" if key in ("fingerprint", "hash", "source", "revision", "snapshot") else text


def model_cards(tables: dict[str, pd.DataFrame], prov: dict[str, Any]) -> str:
    models = tables.get("models")
    recs: dict[str, dict[str, Any]] = {}
    if models is not None and not models.empty:
        for rec in models.drop_duplicates("model").to_dict("records"):
            recs[rec["model"]] = rec
    for name, m in (prov.get("models") or {}).items():
        recs.setdefault(name, {"model": name, **m})
        for key in ("revision", "snapshot"):  # where the hub files came from: provenance only
            if m.get(key):
                recs[name][key] = m[key]
    cards = []
    for name, rec in recs.items():
        rows = [(label, _val(key, rec[key])) for key, label in MODEL_FIELDS
                if key in rec and rec[key] is not None and rec[key] == rec[key] and rec[key] != ""]
        cards.append(_card(str(name), rows, f"model-{_slug(name)}"))
    return '<div class="rb-cards">' + "".join(cards) + "</div>" if cards else ""


def dataset_cards(tables: dict[str, pd.DataFrame], prov: dict[str, Any]) -> str:
    ds = tables.get("datasets")
    cards = []
    if ds is not None and not ds.empty:
        for dataset, g in ds.groupby("dataset", sort=False):
            first = g.iloc[0].to_dict()
            rows = [(label, _val(key, first[key])) for key, label in DATA_FIELDS if key in first]
            for rec in g.to_dict("records"):
                if "mean_tokens" in rec:
                    rows.append((f"Mean length ({rec['model']})", f"{htmltable.fmt(rec['mean_tokens'])} tokens"))
            cards.append(_card(str(dataset), rows, f"data-{_slug(dataset)}"))
    else:
        for name, d in (prov.get("datasets") or {}).items():
            rows = [("Hash", _val("hash", d.get("hash"))), ("Sequences", htmltable.fmt(d.get("n")))]
            cards.append(_card(str(name), rows, f"data-{_slug(name)}"))
    return '<div class="rb-cards">' + "".join(cards) + "</div>" if cards else ""


def inline_svg(svg: str) -> str:
    """A figure's SVG drawing as one raw-HTML block for the Markdown page (no XML prolog, no blank
    lines, which would end the HTML block), through `svgsafe.sanitise`: whatever it came from (a
    builder, a cache entry), nothing scripted reaches the page; a genuine drawing is kept as it is."""
    body = re.sub(r"^\s*<\?xml[^>]*\?>", "", svgsafe.sanitise(svg)).strip()
    body = "\n".join(line for line in body.splitlines() if line.strip())
    return f'<div class="rb-diagram">{body}</div>'


def _slug(text: Any) -> str:
    return "".join(c if c.isalnum() else "-" for c in str(text).lower()).strip("-")
