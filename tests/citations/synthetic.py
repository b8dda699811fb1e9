"""A built site's citation files without a build: version folders of registered figures whose content
hashes and recorded SHA-256 sums are right, their ``versions.json``, ``history.json`` and ``manifest.json``,
and a sentinel folder outside the site with a snapshot of the tree around it (`snapshot`). Cheap: the
readers, ``clean`` and the publishing of versions are tested on it in milliseconds."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from report_builder import guard
from report_builder.citations.version_files import chart_path, permalink, version_hash

FIG, OTHER = "k21-fig3", "k21-fig2"
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="5" height="5" fill="#123"/></svg>'
EVIL_SVG = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def version(site: Path, fig: str, n: int, created: str) -> tuple[str, dict]:
    """Write one version of ``fig`` (its ``n``-th data) into ``site``; (its hash, its index entry)."""
    spec, csv = json.dumps({"mark": "rect", "n": n}), f"layer,value (%)\n1,{n}.5\n"
    h = version_hash(spec, csv, SVG)
    rec = {"recipe": "report_builder figure recipe 1", "figure": {"id": fig, "title": f"title {n}", "paper": "K21"},
           "content_hash": h, "models": {"tiny": {"source": "tiny-a", "fingerprint": "f" * 12}},
           "datasets": {"wiki": {"hash": "d" * 12, "n": 3}}, "params": {}, "max_reconstruction_error": 1e-7,
           "report_builder_version": "0", "git_commit": None, "torch_version": "t", "transformers_version": "t",
           "device": "cpu", "dtype": "float32", "preset": "custom", "date": created,
           "permalink": f"https://example.org/r/{permalink(fig, h)}",
           "config": {"models": [{"name": "tiny", "source": "tiny-a"}], "datasets": [{"id": "wiki", "n": 3}]},
           "roles": {"primary_encoder": "tiny", "primary_causal": None, "encoders": ["tiny"], "variants": ["tiny"],
                     "seed_group": [], "datasets": ["wiki"], "preset": "custom"}, "display": {},
           "inline_limit": 200000}
    files = {"chart.svg": SVG, "chart.png": b"\x89PNG fake", "data.csv": csv, "spec.json": spec,
             "provenance.json": json.dumps(rec, indent=1), "cite.bib": f"@misc{{x{n},\n  url = {{{permalink(fig, h)}}}\n}}\n"}
    folder = site / permalink(fig, h)
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    (folder / "index.html").write_text("<p>version page</p>")
    return h, {"created": created, "title": f"title {n}", "paper": "K21", "files": {k: sha(v) for k, v in sorted(files.items())}}


def make_site(root: Path) -> dict:
    """A site at ``root/site`` with two versions of `FIG` (the second current) and one of `OTHER`, a
    history entry with its difference chart, a manifest; returns the hashes and paths."""
    site = root / "site"
    site.mkdir(parents=True)
    (site / guard.SITE_MARKER).write_text("built by report_builder\n")
    (site / "index.html").write_text("<p>home</p>")
    old, e_old = version(site, FIG, 1, "2020-01-01T00:00:00+00:00")
    new, e_new = version(site, FIG, 2, "2020-02-01T00:00:00+00:00")
    other, e_other = version(site, OTHER, 3, "2020-01-01T00:00:00+00:00")
    (site / "figures" / FIG / "data.csv").write_text("current copy\n")
    index = {"format": "report_builder figure versions 1", "current": {FIG: new, OTHER: other},
             "figures": {FIG: {old: e_old, new: e_new}, OTHER: {other: e_other}}}
    (site / "figures" / "versions.json").write_text(json.dumps(index, indent=1))
    chart = chart_path(FIG, old, new)
    (site / chart).parent.mkdir(parents=True)
    (site / chart).write_text(SVG)
    change = {"id": FIG, "title": "t", "old": old, "new": new, "old_permalink": permalink(FIG, old),
              "new_permalink": permalink(FIG, new), "inputs": [], "data": {}, "chart": chart, "chart_sha256": sha(SVG)}
    entry = {"id": "e1", "date": "2020-02-01", "models": {}, "datasets": {}, "libraries": {}, "inputs_changed": [],
             "added": [], "changed": [change], "removed": []}
    (site / "history.json").write_text(json.dumps({"format": "report_builder report history 1", "entries": [entry]}))
    (site / "figures" / "manifest.json").write_text(json.dumps({"figures": {FIG: {"hash": new}, OTHER: {"hash": other}}}))
    return {"site": site, "old": old, "new": new, "other": other, "chart": chart, "index": index}


def sentinel(root: Path) -> Path:
    """A folder outside the site a hostile earlier site points at: a secret, a file to be hard-linked,
    a script SVG, a fake version folder."""
    s = root / "sentinel"
    (s / "fake").mkdir(parents=True)
    (s / "secret.txt").write_text("private key\n")
    (s / "hard.txt").write_text("hard-linked into the site\n")
    (s / "page.svg").write_text(EVIL_SVG)
    for name in ("chart.svg", "chart.png", "data.csv", "spec.json", "provenance.json", "cite.bib"):
        (s / "fake" / name).write_text(name)
    return s


def snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """Everything under ``root`` but ``skip`` (links not followed): path -> (kind, content SHA-256 or link
    target, mtime) for files and links, the sorted entries for folders (a folder's own mtime moves when a
    temporary sibling of ``--out`` comes and goes)."""
    skip_abs = {os.path.abspath(p) for p in skip}
    out: dict[str, tuple] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in skip_abs]
        rel = os.path.relpath(dirpath, root)
        out[rel] = ("dir", tuple(sorted(n for n in dirs + files if os.path.join(dirpath, n) not in skip_abs
                                        and not n.startswith("."))))
        for n in files:
            p = Path(dirpath) / n
            if str(p) in skip_abs:
                continue
            st = p.lstat()
            if p.is_symlink():
                out[os.path.join(rel, n)] = ("link", os.readlink(p), st.st_mtime_ns)
            elif p.is_file():
                out[os.path.join(rel, n)] = ("file", sha(p.read_bytes()), st.st_mtime_ns)
            else:
                out[os.path.join(rel, n)] = ("special", None, st.st_mtime_ns)
    return out
