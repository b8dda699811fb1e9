"""The one reader of what the tool wrote before: a figure version folder given to `reproduce` or
`diff`, and -- through `earlier_site`, built on the functions here -- an earlier site
(``figures/versions.json``, ``history.json``, ``figures/manifest.json``, the version folders). Nothing it
reads is trusted: it may have been edited, planted, truncated or replaced by links since the tool
wrote it.

Every file is read once, bounded: a regular file only (not a link, device, FIFO or socket), with no
symbolic link on its path below the root (`atomic.read_inside`: ``O_NOFOLLOW`` folder by folder), at
most `CAPS` bytes; JSON at most `MAX_DEPTH` levels deep. Every figure id is checked against the figure
registry (and its form), every content hash against its exact form (12 lowercase hex digits), every
SHA-256 against 64, every file name against a version folder's known files (`version_files.FILES`),
every permalink against the one its id and hash give. The rest of the code gets validated objects
(`Record`; `earlier_site.Version`, `Index`, `History`) whose strings may be joined into a path; no other
module of the citation stage opens these files (`tests/test_architecture.py` checks it). Pitfall: a check here that raises anything but `BadRecord`/``OSError`` on hostile input becomes an
"internal error" in the CLI: every type is checked before it is used.
"""
from __future__ import annotations

import contextvars
import functools
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from report_builder import atomic
from report_builder.errors import ReportBuilderError, UsageError
from report_builder.citations.version_files import HASH, permalink, version_hash

CAPS = {"index": 64 << 20, "recipe": 8 << 20, "text": 1 << 20, "file": 256 << 20}
"""The most bytes read of: an index (versions.json, history.json, manifest.json), a recipe
(provenance.json), a small text (cite.bib), any other file of a version (spec.json, data.csv, charts)."""
MAX_DEPTH = 32
"""The deepest JSON nesting accepted (a recipe is about 8 levels deep)."""
SHA256 = re.compile(r"[0-9a-f]{64}")
ID_FORM = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


class BadRecord(UsageError):
    """A file read back is not what the tool writes there (unreadable, too large, a link or special file,
    malformed, or naming an unknown figure or a hash of the wrong form); the message names the file."""


# ---------------------------------------------------------------- forms


DECLARED: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("declared_figures", default=frozenset())
"""The figure ids the running build declares beside the registry's (`site.build.render_site` sets them for
the build: a figure passed to it is a known one while it builds)."""


@functools.lru_cache(maxsize=1)
def registered_ids() -> frozenset[str] | None:
    """Every registered figure id; None on an install without the figures (compute only: form only)."""
    try:
        from report_builder.figures.registry import ids
    except ImportError:
        return None
    return frozenset(ids())


def figure_id(value: Any) -> str | None:
    """``value`` when it is a registered figure id (a lowercase slug; the running build's own declarations,
    `DECLARED`, count as registered), else None."""
    known = registered_ids()
    if isinstance(value, str) and ID_FORM.fullmatch(value) and (
            known is None or value in known or value in DECLARED.get()):
        return value
    return None


def content_hash(value: Any) -> str | None:
    """``value`` when it is a content hash (exactly 12 lowercase hex digits), else None."""
    return value if isinstance(value, str) and HASH.fullmatch(value) else None


# ---------------------------------------------------------------- bounded reading


def read_bytes(root: Path, rel: str | Path, cap: int) -> bytes:
    """The bytes of the regular file ``root/rel`` (`atomic.read_inside`); `BadRecord` naming it when it is a
    link, special file, larger than ``cap`` or on a path through a link; FileNotFoundError when missing."""
    try:
        return atomic.read_inside(root, Path(root) / rel, cap)
    except FileNotFoundError:
        raise
    except atomic.NotRegular as e:
        raise BadRecord(f"{Path(root) / rel}: {e}") from None
    except (OSError, ReportBuilderError) as e:
        raise BadRecord(f"{Path(root) / rel}: cannot be read ({e.strerror if isinstance(e, OSError) else e})") from None


def _depth(obj: Any) -> int:
    deepest, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        items = o.values() if isinstance(o, dict) else o if isinstance(o, list) else None
        if items is None:
            continue
        deepest = max(deepest, d)
        if d > MAX_DEPTH:
            return d
        stack.extend((v, d + 1) for v in items)
    return deepest


def load_json(data: bytes, where: Any) -> Any:
    """``data`` parsed as JSON; `BadRecord` naming ``where`` when it is not UTF-8 JSON or nested deeper
    than `MAX_DEPTH`."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise BadRecord(f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise BadRecord(f"{where}: not valid JSON ({str(e)[:120]})") from None
    if _depth(obj) > MAX_DEPTH:
        raise BadRecord(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    return obj


def read_json(root: Path, rel: str | Path, cap: int) -> Any:
    """`read_bytes` + `load_json`."""
    return load_json(read_bytes(root, rel, cap), Path(root) / rel)


def read_text(root: Path, rel: str | Path, cap: int = CAPS["text"]) -> str:
    """A small UTF-8 text file (``cite.bib``), bounded; `BadRecord` when not UTF-8."""
    try:
        return read_bytes(root, rel, cap).decode("utf-8")
    except UnicodeDecodeError:
        raise BadRecord(f"{Path(root) / rel}: not UTF-8 text") from None


def read_data(root: Path, rel: str | Path = "data.csv"):
    """A version's ``data.csv`` as the table had it (`version_files.read_csv`), bounded; None when it is
    missing, not a regular file, too large or not a CSV."""
    import pandas as pd

    from report_builder.citations.version_files import read_csv

    try:
        return read_csv(io.StringIO(read_bytes(root, rel, CAPS["file"]).decode("utf-8")))
    except (OSError, BadRecord, UnicodeDecodeError, ValueError, pd.errors.ParserError):
        return None


# ---------------------------------------------------------------- a version's record (provenance.json)

_SCALARS = (str, int, float, bool, type(None))
_SHOWN = ("report_builder_version", "git_commit", "torch_version", "transformers_version", "device", "dtype",
          "preset", "date", "max_reconstruction_error", "examples")


@dataclass(frozen=True)
class Record:
    """A version's ``provenance.json``, validated (`check_record`): its figure id (registered), content
    hash (its form), the parsed record exactly as written (`data`: its seal still checks) and the file's
    text as published; `shown`: the record with every field the site shows present."""

    figure: str
    content_hash: str
    data: dict[str, Any]
    text: str

    @property
    def shown(self) -> dict[str, Any]:
        return {"models": {}, "datasets": {}, "params": {}, **{k: None for k in _SHOWN}, **self.data}


def _dict_of_dicts(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, dict) for k, x in v.items())


def check_record(obj: Any, *, linked: bool = True) -> str | None:
    """Why ``obj`` is not a version's record the site can show, or None (``linked``: its ``permalink``,
    which a page links, must be its own version's address; `reproduce` and `diff` link nothing and
    report an edited recipe themselves)."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    fig = obj.get("figure")
    if not isinstance(fig, dict) or figure_id(fig.get("id")) is None:
        return "figure.id is not a registered figure id"
    if not all(isinstance(fig.get(k, ""), str) for k in ("title", "paper")):
        return "figure.title/paper are not text"
    if content_hash(obj.get("content_hash")) is None:
        return "content_hash is not 12 lowercase hex digits"
    if not _dict_of_dicts(obj.get("models", {})) or not _dict_of_dicts(obj.get("datasets", {})):
        return "models/datasets are not objects of objects"
    if not isinstance(obj.get("params", {}), dict):
        return "params is not an object"
    if not all(isinstance(obj.get(k), _SCALARS) for k in _SHOWN):
        return "a shown field is not a plain value"
    err, ex = obj.get("max_reconstruction_error"), obj.get("examples")
    if err is not None and (isinstance(err, bool) or not isinstance(err, (int, float))):
        return "max_reconstruction_error is not a number"
    if ex is not None and (isinstance(ex, bool) or not isinstance(ex, int)):
        return "examples is not a whole number"
    bound = obj.get("error_bound", 0.0)  # the version page prints it (float)
    if isinstance(bound, bool) or not isinstance(bound, (int, float)):
        return "error_bound is not a number"
    if not isinstance(obj.get("chunk_rule"), _SCALARS):
        return "chunk_rule is not a plain value"
    link = obj.get("permalink")
    if linked and link is not None and not _permalink_ok(link, fig["id"], obj["content_hash"]):
        return "permalink is not this version's address"
    return None


def _permalink_ok(link: Any, fig_id: str, h: str) -> bool:
    from report_builder.values import check_site_url

    rel = permalink(fig_id, h)
    if not isinstance(link, str) or not link.endswith(rel):
        return False
    prefix = link[: -len(rel)]
    if not prefix:
        return True
    try:
        return check_site_url(prefix) == prefix
    except ReportBuilderError:
        return False


def record_from(data: bytes, where: Any, *, linked: bool = True) -> Record:
    """A `Record` of a provenance.json's bytes; `BadRecord` naming ``where`` and why otherwise."""
    obj = load_json(data, where)
    why = check_record(obj, linked=linked)
    if why is not None:
        raise BadRecord(f"{where}: not a figure version's record ({why})")
    return Record(obj["figure"]["id"], obj["content_hash"], obj, data.decode("utf-8"))


def read_record(folder: Path, fig_id: str | None = None, h: str | None = None) -> Record:
    """The record of the version folder ``folder`` (its provenance.json, bounded), checked to name
    ``fig_id``/``h`` when given; `BadRecord` otherwise, FileNotFoundError when it has none."""
    where = Path(folder) / "provenance.json"
    rec = record_from(read_bytes(folder, "provenance.json", CAPS["recipe"]), where)
    if (fig_id is not None and rec.figure != fig_id) or (h is not None and rec.content_hash != h):
        raise BadRecord(f"{where}: names {rec.figure} {rec.content_hash}, not the version of its folder")
    return rec


def check_recipe(rec: Record) -> str | None:
    """Why a version's record is not a recipe `reproduce` can rebuild from, or None: the recipe format,
    a configuration with models (each a name and a source) and datasets (each an id), roles naming only
    `figures.spec.Roles` fields, the token display judgement and the inline limit of their types."""
    import dataclasses

    from report_builder.citations.recipe import FORMAT
    from report_builder.figures.spec import Roles

    d = rec.data
    if d.get("recipe") != FORMAT:
        return f"recipe is not {FORMAT!r} (made by an older report_builder?)"
    conf = d.get("config")
    if not isinstance(conf, dict) or not isinstance(conf.get("models"), list) or not conf["models"]:
        return "config.models is not a list of models"
    if not all(isinstance(m, dict) and isinstance(m.get("name"), str) and isinstance(m.get("source"), str)
               for m in conf["models"]):
        return "a model of config.models has no name and source"
    if not isinstance(conf.get("datasets", []), list) or not all(
            isinstance(x, dict) and isinstance(x.get("id"), str) for x in conf.get("datasets", [])):
        return "a dataset of config.datasets has no id"
    roles, fields = d.get("roles", {}), {f.name for f in dataclasses.fields(Roles)}
    needed = {f.name for f in dataclasses.fields(Roles) if f.default is dataclasses.MISSING}
    if not isinstance(roles, dict) or set(roles) - fields:
        return f"roles has keys other than {', '.join(sorted(fields))}"
    if needed - set(roles):
        return f"roles lacks {', '.join(sorted(needed - set(roles)))}"
    if not all(v is None or isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
               for v in roles.values()):
        return "a role is not a name or a list of names"
    display = d.get("display", {})
    if not _dict_of_dicts(display) or not all(isinstance(x.get("style"), (str, type(None)))
                                              and isinstance(x.get("causal"), (bool, type(None))) for x in display.values()):
        return "display is not an object of {style: text, causal: true/false} objects"
    limit = d.get("inline_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit < 2 ** 31):
        return "inline_limit is not a positive whole number"
    fig = d["figure"]
    if not isinstance(fig.get("tables", []), list) or not all(isinstance(x, str) for x in fig.get("tables", [])) \
            or not isinstance(fig.get("analyses", {}), dict):
        return "figure.tables/analyses are malformed"
    return None


def read_recipe(path: str | Path) -> tuple[Record, Path]:
    """(the recipe, its provenance.json path) of a version folder or a provenance file: read bounded
    (no link as the folder or file, `read_bytes`), validated (`check_record`, `check_recipe`); `BadRecord`
    (exit 2) naming the file and what is wrong."""
    from report_builder.values import check_path

    check_path(str(path), "reproduce PATH", error=UsageError)
    p = Path(path).expanduser()
    folder, name = (p, "provenance.json") if p.is_dir() else (p.parent, p.name)
    prov = folder / name
    if p.is_symlink():
        raise BadRecord(f"{path}: a symbolic link; give the figure version folder (figures/<id>/<hash>/) itself")
    try:
        rec = record_from(read_bytes(folder, name, CAPS["recipe"]), prov, linked=False)
    except FileNotFoundError:
        raise BadRecord(f"{path}: no provenance.json there; give a figure version folder (figures/<id>/<hash>/) "
                        f"or its provenance.json") from None
    why = check_recipe(rec)
    if why is not None:
        raise BadRecord(f"{prov}: not a figure recipe this report_builder can rebuild ({why})")
    return rec, prov


def content_hashes(folder: Path) -> set[str]:
    """The content hashes ``folder``'s own ``spec.json`` and ``data.csv`` give (with and without its
    ``chart.svg``, which a diagram's hash covers), read bounded; `BadRecord` when one cannot be read,
    FileNotFoundError when one is missing."""
    plain, drawn = content_hash_pair(folder)
    return {plain, *([drawn] if drawn is not None else [])}


def content_hash_pair(folder: Path) -> tuple[str, str | None]:
    """`content_hashes` apart: (the hash of ``spec.json`` and ``data.csv``, the hash with ``chart.svg`` or
    None without one), so a message can say which is which."""
    try:
        spec = read_bytes(folder, "spec.json", CAPS["file"]).decode("utf-8")
        csv = read_bytes(folder, "data.csv", CAPS["file"]).decode("utf-8")
        try:
            svg = read_bytes(folder, "chart.svg", CAPS["file"]).decode("utf-8")
        except FileNotFoundError:
            svg = None
    except UnicodeDecodeError:
        raise BadRecord(f"{folder}: spec.json, data.csv or chart.svg is not UTF-8 text") from None
    return version_hash(spec, csv), (version_hash(spec, csv, svg) if svg is not None else None)
