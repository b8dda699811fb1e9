"""`report-builder build --preset paper` end to end on stand-ins, as a user who downloaded the papers'
models and data once: every paper-preset hub id is a tiny random model in a real HF hub cache, SST-2 /
MNLI / CoNLL-2003 come from `--data-dir`, `HF_HUB_OFFLINE=1`, and every socket connection or DNS
lookup fails the build (a `sitecustomize` blocks them in the subprocess and records each attempt). To keep
it fast: the frequency ranks map `FREQ_WORDS` words, and the user cache starts with this machine's Vega
bundle and evaluation sets (`seed_user_cache`)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests import paper_standins

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

BLOCK_NETWORK = textwrap.dedent('''
    import os, socket

    _LOG = os.environ["RB_NETWORK_LOG"]

    def _record(what):
        with open(_LOG, "a") as fh:
            fh.write(what + "\\n")

    _connect = socket.socket.connect

    def _blocked_connect(self, address, *a, **k):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _record(f"connect {address!r}")
            raise OSError(f"network blocked by the test: connect to {address!r}")
        return _connect(self, address, *a, **k)

    def _blocked_lookup(host, *a, **k):
        _record(f"getaddrinfo {host!r}")
        raise OSError(f"network blocked by the test: DNS lookup of {host!r}")

    socket.socket.connect = _blocked_connect
    socket.socket.connect_ex = _blocked_connect
    socket.getaddrinfo = _blocked_lookup

    if os.environ.get("RB_TEST_FREQ_WORDS"):  # see FREQ_WORDS
        from report_builder.data import frequency

        frequency.frequency_ranks.__kwdefaults__["n_words"] = int(os.environ["RB_TEST_FREQ_WORDS"])
''')

FREQ_WORDS = 10_000
"""How many wordfreq words the build's frequency ranks map (`data.frequency.N_WORDS`: 150,000): tokenizing
150,000 words (300,000 for the cased BPE ones) for each of the 3 stand-in tokenizers was 20-35 s of this module;
10,000 cover the 600-token stand-in vocabularies as well. The ranks at `N_WORDS` on a real vocabulary:
tests/data/test_frequency.py. `test_frequency_ranks_in_the_user_cache` checks that this took effect."""

SMALL = {
    "preset": "paper",
    "device": "cpu",
    "batch_size": 8,
    "max_memory": "256MiB",
    # the paper's four datasets with no `path:` — --data-dir fills them
    "datasets": [
        {"id": "wiki", "n": 4, "k24_n": 2, "max_length": 48},
        {"id": "sst2", "n": 3, "k24_n": 1, "max_length": 32},
        {"id": "mnli", "n": 3, "k24_n": 1, "max_length": 32},
        {"id": "conll2003", "n": 3, "k24_n": 1, "max_length": 32},
    ],
    "k24": {"top_k": 5, "examples": 1},
}


def seed_user_cache(tmp: Path) -> None:
    """``tmp/user-cache`` (the subprocess's `REPORT_BUILDER_CACHE`, `network_env`) starts with this
    machine's derived data, as tests/test_regenerate.py's does: the Vega bundle (``vendor/``, seconds of
    bundling) and the evaluation sets (``evalsets/``: the offline Wikipedia set, 3 s of stripping markup per
    process). No results, and no frequency ranks (`test_frequency_ranks_in_the_user_cache` counts them)."""
    from report_builder import guard

    for memo in ("vendor", "evalsets"):
        src = guard.user_cache_dir() / memo
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, tmp / "user-cache" / memo, symlinks=False)


def network_env(tmp: Path, hub: Path, freq_words: int | None = None) -> dict[str, str]:
    """Environment of a subprocess with the network blocked and the stand-in hub cache (and frequency
    ranks of ``freq_words`` words, `FREQ_WORDS`, when given)."""
    block = tmp / "netblock"
    block.mkdir(exist_ok=True)
    (block / "sitecustomize.py").write_text(BLOCK_NETWORK)
    log = tmp / "network.log"
    log.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(block), str(ROOT), os.environ.get("PYTHONPATH", "")]),
               HF_HOME=str(tmp / "hf-home"), HF_HUB_CACHE=str(hub), HF_HUB_OFFLINE="1",
               RB_NETWORK_LOG=str(log), REPORT_BUILDER_CACHE=str(tmp / "user-cache"),
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), TOKENIZERS_PARALLELISM="false")
    if freq_words:
        env["RB_TEST_FREQ_WORDS"] = str(freq_words)
    return env


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("paper")
    revs = paper_standins.build_hub_cache(tmp / "hub")
    paper_standins.write_data_dir(tmp / "data")
    (tmp / "paper.yaml").write_text(yaml.safe_dump(SMALL, sort_keys=False))
    seed_user_cache(tmp)
    env = network_env(tmp, tmp / "hub", FREQ_WORDS)
    r = subprocess.run([sys.executable, "-m", "report_builder", "build", "--config", str(tmp / "paper.yaml"),
                        "--data-dir", str(tmp / "data"), "--no-progress", "--cache", str(tmp / "cache"),
                        "--out", str(tmp / "site")], capture_output=True, text=True, env=env, timeout=1500, cwd=tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return tmp, r.stdout + r.stderr, revs


def test_no_network_attempt(paper):
    tmp, log, _ = paper
    assert (tmp / "network.log").read_text() == ""
    assert "network blocked by the test" not in log


def test_frequency_ranks_in_the_user_cache(paper):
    """k21_frequency ranked each stand-in tokenizer's tokens (WordPiece for the BERT family, byte-level BPE
    for RoBERTa and GPT-2) once, into the user cache, over `FREQ_WORDS` words (the seed took effect)."""
    tmp = paper[0]
    files = sorted(p.name for p in (tmp / "user-cache" / "freq").glob("*.json"))
    assert len(files) == len(set(paper_standins.paper_ids().values())) == 3, files
    assert all(f"-{FREQ_WORDS}-" in f for f in files), files


def test_network_block_is_real(tmp_path):
    """The blocker itself: a connection attempt in a subprocess fails and is recorded."""
    env = network_env(tmp_path, tmp_path / "hub")
    r = subprocess.run([sys.executable, "-c", "import socket; socket.create_connection(('huggingface.co', 443), 2)"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0 and "network blocked by the test" in r.stderr
    assert "huggingface.co" in (tmp_path / "network.log").read_text()


def test_every_id_rendered(paper):
    from report_builder.api import list_figures

    tmp, log, _ = paper
    ids = [f["id"] for f in list_figures()]
    assert sum(i.startswith("k21-") for i in ids) == 28 and sum(i.startswith("k24-") for i in ids) == 11
    m = re.search(r"site: (\d+) figures on the site, (\d+) not configured", log)
    assert m and int(m.group(1)) == len(ids) and m.group(2) == "0", log[-2000:]
    site = tmp / "site"
    for fid in ids:
        assert (site / "figures" / fid).is_dir(), fid
    for page in ("k21.html", "k24.html"):
        assert "not configured" not in (site / page).read_text().lower()


def test_data_dir_filled_every_dataset(paper):
    tmp, _, _ = paper
    resolved = yaml.safe_load((tmp / "site" / "config.resolved.yaml").read_text())
    assert resolved["data_dir"] == str(tmp / "data")
    models = (tmp / "site" / "models.html").read_text()
    for folder, name in (("SST-2", "dev.tsv"), ("MNLI", "dev_matched.tsv"), ("conll2003", "valid.txt")):
        assert f"{folder}/{name}" in models


def test_snapshot_hashes_shown(paper):
    tmp, _, revs = paper
    models = (tmp / "site" / "models.html").read_text()
    for rev in (revs["bert-base-uncased"], revs["gpt2"], revs["google/multiberts-seed_24"]):
        assert rev in models
    prov = json.loads((tmp / "site" / "figures" / "k21-tab2" / "provenance.json").read_text())
    assert prov["models"]["bert-base-uncased"]["snapshot"] == revs["bert-base-uncased"]
    assert revs["roberta-base"] in (tmp / "site" / "k21.html").read_text()


def _section(page: str, fid: str) -> str:
    start = page.index(f'id="{fid}"')
    nxt = re.search(r'<h[23] id="k2[14]-', page[start + 10:])
    return page[start: start + 10 + nxt.start()] if nxt else page[start:]


def test_paper_numbers_beside_ours(paper):
    """Every K21 id the paper reports numbers for shows paper value, ours and the difference, for the
    paper's own model (same model: a check, not context)."""
    tmp = paper[0]
    page = (tmp / "site" / "k21.html").read_text()
    for fid in ("k21-tab1", "k21-tab2", "k21-tab3", "k21-tab5", "k21-tab6", "k21-tab7", "k21-tab8", "k21-tab9",
                "k21-tab10", "k21-tab11"):
        sec = _section(page, fid)
        assert "The paper's numbers beside ours (same model)" in sec, fid
        assert "Ours − paper" in sec, fid
        assert "<table" in sec and "&lt;table" not in sec, fid  # rendered as a table, not escaped markup
        csv = (tmp / "site" / "figures" / fid / "paper_vs_ours.csv").read_text().splitlines()
        assert csv[0].endswith("Statistic,Paper,Ours (value),Ours − paper") and len(csv) > 1, fid
    tab2 = (tmp / "site" / "figures" / "k21-tab2" / "paper_vs_ours.csv").read_text()
    assert "bert-base-uncased,bert-base-uncased,wiki,ATTNRESLN-N,mean (%),18.8," in tab2  # the unit named
    assert "roberta-large,roberta-large," in (tmp / "site" / "figures" / "k21-tab5" / "paper_vs_ours.csv").read_text()


def test_k24_names_the_papers_models_and_relations(paper):
    from report_builder.figures.registry import all_figures
    from report_builder.figures.spec import FINDING

    page = (paper[0] / "site" / "k24.html").read_text()
    for name in ("bert-base-uncased", "gpt2", "models: bert-base-uncased and gpt2"):
        assert name in page
    for spec in all_figures():
        if spec.paper == "K24":
            assert spec.reproduces, spec.id
            bib = (paper[0] / "site" / "figures" / spec.id / "cite.bib").read_text()
            assert (FINDING in bib) == spec.is_finding, spec.id


def test_fig2_is_a_drawn_diagram(paper):
    tmp = paper[0]
    sec = _section((tmp / "site" / "k21.html").read_text(), "k21-fig2")
    assert "<svg" in sec and "params" not in sec
    svg = (tmp / "site" / "figures" / "k21-fig2" / "chart.svg").read_text()
    assert "ATTNRESLN-N" in svg and "<title" in svg


def test_plan_before_download(tmp_path):
    """`plan --preset paper --json` on a machine with none of the paper's models and only SST-2 of its
    data (empty HF cache, HF_HUB_OFFLINE=1, sockets blocked): exit 0, every model sized from the shapes
    recorded in papers.py, MNLI and CoNLL-2003 from the recorded split sizes and K21 Table 1's mean
    lengths, each estimate flagged; SST-2 and the offline Wikipedia set are read as they are."""
    from report_builder import costs, papers

    hub = tmp_path / "hub"
    hub.mkdir()
    paper_standins.write_data_dir(tmp_path / "data", n=5)
    for gone in ("MNLI", "conll2003"):
        shutil.rmtree(tmp_path / "data" / gone)
    seed_user_cache(tmp_path)
    env = network_env(tmp_path, hub)
    r = subprocess.run([sys.executable, "-m", "report_builder", "plan", "--preset", "paper", "--json",
                        "--data-dir", str(tmp_path / "data"), "--cache", str(tmp_path / "cache"), "--gpu", "H200"],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "network.log").read_text() == ""
    assert not (tmp_path / "cache").exists() and not any(hub.iterdir())  # wrote nothing, downloaded nothing
    est = json.loads(r.stdout)
    models = {m["source"] for m in papers.preset_models()}
    assert set(est["estimates"]["models"]) == models == set(papers.PAPER_SHAPES)
    assert all(v["flags"] == ["shape", "key", "lengths"] for v in est["estimates"]["models"].values())
    assert set(est["estimates"]["datasets"]) == {"mnli", "conll2003"}
    assert "DIR/MNLI/dev_matched.tsv" in est["estimates"]["datasets"]["mnli"]["why"]
    by = {(t["analysis"], t["model"], t["dataset"]): t for t in est["tasks"]}
    mnli = by[("k21_mixing", "bert-large-uncased", "mnli")]
    assert mnli["sequences"] == 1000 and mnli["tokens"] == 1000 * 39  # min(n, 9815 pairs) x Table 1's mean
    assert mnli["estimated"] == ["shape", "key", "items", "lengths"] and mnli["key"] is None
    assert by[("k21_mixing", "bert-large-uncased", "conll2003")]["tokens"] == 1000 * 21
    sst2 = by[("k21_mixing", "bert-large-uncased", "sst2")]
    assert sst2["sequences"] == 5 and sst2["estimated"] == ["shape", "key", "lengths"]  # the file is here
    wiki = by[("k21_mixing", "bert-base-uncased", "wiki")]
    assert wiki["sequences"] == 992 and 80 * 992 < wiki["tokens"] < 128 * 992  # the offline set, MiniLM's vocabulary
    assert by[("architecture", "gpt2", None)]["estimated"] == ["shape", "key"]  # reads no tokens
    # the recorded shapes price the models as their configs would
    assert by[("k24_scopes", "bert-large-uncased", "wiki")]["flops"] > 3 * by[("k24_scopes", "bert-base-uncased",
                                                                                "wiki")]["flops"]
    assert est["totals"]["estimated"] == len(est["tasks"]) and est["totals"]["seconds"] > 0
    text = costs.format_plan(est)
    assert "estimated: shape, key, items, lengths" in text and "tasks estimated from recorded facts" in text
    assert "note: estimated (items, lengths): datasets conll2003 (DIR/conll2003/valid.txt), mnli" in text
    assert "note: estimated = shape: model size from the architecture recorded in papers.py" in text
