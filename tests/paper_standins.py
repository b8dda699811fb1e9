"""Stand-ins for the papers' setting: tiny random models under every hub id of the ``paper`` preset,
in a real Hugging Face hub-cache layout, plus tiny SST-2 / MNLI / CoNLL-2003 files for ``--data-dir``.

What a user has after downloading the paper's models once, only tiny: each id gets
``<hub>/models--<org>--<name>/snapshots/<rev>/`` (config.json, model.safetensors and real tokenizer
files) and ``refs/main`` naming ``<rev>``, with the files stored once under ``blobs/`` and linked from
the snapshot as the hub client does. The tokenizers are trained here on the offline texts (a WordPiece
vocabulary for the BERT family, a byte-level BPE for RoBERTa and GPT-2), so nothing comes from the
network. Families match the paper: BERT (post-LN), RoBERTa (post-LN) and GPT-2 (pre-LN).

Pitfall: models of one family share one weights blob unless their seed differs (the MultiBERTs seeds
get distinct weights, so the seed-group spread is not trivially zero); keep them tiny, the paper preset
analyses 33 models.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

#: Every hub id of the paper preset -> stand-in family.
def paper_ids() -> dict[str, str]:
    """The hub ids of ``config.PRESETS['paper']`` and the family each stand-in is built as."""
    from report_builder.config import PRESETS

    out = {}
    for m in PRESETS["paper"]["models"]:
        src = m["source"]
        out[src] = "gpt2" if src == "gpt2" else "roberta" if src.startswith("roberta") else "bert"
    return out


def _offline_lines(limit: int = 400) -> list[str]:
    from report_builder.data.gensim_data import NEWS_FILE, SENTIMENT_FILE, gensim_test_file

    lines = []
    for name in (SENTIMENT_FILE, NEWS_FILE):
        with open(gensim_test_file(name), encoding="utf-8", errors="replace") as fh:
            lines += [ln.strip() for ln in fh if ln.strip()]
    return lines[:limit]


_EXTRA = ("The man went to the store. He bought a gallon of milk. New York Times Kobayashi "
          "residual normalization attention layer")


def _train_wordpiece(lines: list[str], out: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizer

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(lines + [_EXTRA], trainers.WordPieceTrainer(vocab_size=600, special_tokens=special,
                                                                       show_progress=False))
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("".join(t + "\n" for t, _ in vocab), encoding="utf-8")
    BertTokenizer(vocab=dict(vocab), do_lower_case=True).save_pretrained(str(out))


def _train_bpe(lines: list[str], out: Path, family: str) -> None:
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Tokenizer, RobertaTokenizer

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"] if family == "roberta" else ["<|endoftext|>"]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(lines + [_EXTRA], vocab_size=600, min_frequency=2, special_tokens=special,
                            show_progress=False)
    out.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(out))
    cls = RobertaTokenizer if family == "roberta" else GPT2Tokenizer
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    merges = [tuple(ln.split(" ")) for ln in (out / "merges.txt").read_text(encoding="utf-8").splitlines()
              if ln and not ln.startswith("#version")]
    cls(vocab=vocab, merges=merges).save_pretrained(str(out))


def _tiny_model(family: str, vocab_size: int, seed: int, pad_id: int | None, bos_id: int | None):
    import torch
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model, RobertaConfig, RobertaModel

    torch.manual_seed(seed)
    common = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if family == "bert":
        m = BertModel(BertConfig(vocab_size=vocab_size, max_position_embeddings=128, **common))
    elif family == "roberta":
        m = RobertaModel(RobertaConfig(vocab_size=vocab_size, max_position_embeddings=130, pad_token_id=pad_id,
                                       bos_token_id=0, eos_token_id=2, **common))
    else:
        m = GPT2Model(GPT2Config(vocab_size=vocab_size, n_embd=16, n_layer=2, n_head=2, n_positions=128,
                                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=bos_id,
                                 eos_token_id=bos_id))
    return m.eval()


def _blob(blobs: Path, src: Path) -> str:
    """Store ``src`` under ``blobs/<sha256>`` (once) and return the blob name."""
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    target = blobs / digest
    if not target.exists():
        shutil.copyfile(src, target)
    return digest


def _publish(hub: Path, repo_id: str, files: dict[str, Path], shared_blobs: Path) -> str:
    """Lay ``files`` out as the hub client does for ``repo_id``; returns the snapshot revision."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    blobs = repo / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha1(repo_id.encode())
    names = {}
    for name, src in sorted(files.items()):
        digest = _blob(shared_blobs, src)
        h.update(name.encode() + digest.encode())
        names[name] = digest
    rev = h.hexdigest()
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    for name, digest in names.items():
        link = blobs / digest
        if not link.exists():
            os.symlink(shared_blobs / digest, link)
        os.symlink(os.path.relpath(link, snap), snap / name)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    return rev


def build_hub_cache(hub: str | Path, ids: dict[str, str] | None = None) -> dict[str, str]:
    """Write stand-ins for ``ids`` (hub id -> family; default: every paper-preset id) under ``hub``.

    Args:
        hub: the folder to use as ``HF_HUB_CACHE`` (created).
    Returns:
        hub id -> snapshot revision.
    """
    from safetensors.torch import save_file

    hub = Path(hub)
    ids = ids or paper_ids()
    work = Path(tempfile.mkdtemp(prefix="standins-", dir=hub.parent if hub.parent.exists() else None))
    shared = hub / ".standin-blobs"
    shared.mkdir(parents=True, exist_ok=True)
    try:
        lines = _offline_lines()
        toks: dict[str, Path] = {}
        for fam in sorted(set(ids.values())):
            d = work / f"tok-{fam}"
            (_train_wordpiece(lines, d) if fam == "bert" else _train_bpe(lines, d, fam))
            toks[fam] = d
        revs, weights = {}, {}
        for k, (repo_id, fam) in enumerate(sorted(ids.items())):
            seed = int(repo_id.rsplit("_", 1)[1]) + 1 if "multiberts-seed_" in repo_id else 0
            key = (fam, seed)
            if key not in weights:
                from transformers import AutoTokenizer

                tok = AutoTokenizer.from_pretrained(str(toks[fam]))
                m = _tiny_model(fam, len(tok), seed, tok.pad_token_id, tok.bos_token_id)
                d = work / f"model-{fam}-{seed}"
                d.mkdir()
                m.config._name_or_path = repo_id
                m.config.save_pretrained(str(d))
                save_file({n: t.contiguous() for n, t in m.state_dict().items()}, str(d / "model.safetensors"),
                          metadata={"format": "pt"})
                weights[key] = d
            files = {p.name: p for p in weights[key].iterdir()}
            files.update({p.name: p for p in toks[fam].iterdir()})
            revs[repo_id] = _publish(hub, repo_id, files, shared)
        return revs
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------ real shapes, no weights

def _shape_config(repo_id: str, family: str):
    """The model's real architecture (`papers.PAPER_SHAPES`, the one record of it) as an HF config."""
    from transformers import AutoConfig, RobertaConfig

    from report_builder.papers import PAPER_SHAPES

    shape = PAPER_SHAPES[repo_id]
    if family == "roberta":
        return RobertaConfig(type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2, **shape.config_kwargs())
    return AutoConfig.for_model(shape.model_type, **shape.config_kwargs())


def _names_only(cfg, path: Path) -> None:
    """A safetensors file whose header names every tensor of the base model ``cfg`` builds (its shapes, from a
    meta copy) and that holds no data: a plan reads the names (`models.weight_names`), any load fails."""
    import json
    import struct

    import torch
    from transformers import AutoModel

    with torch.device("meta"):
        model = AutoModel.from_config(cfg)
    header, at = {}, 0
    for name, t in model.state_dict().items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + 4 * t.numel()]}
        at += 4 * t.numel()
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def build_shape_cache(hub: str | Path, *, bert_vocab: bool = False) -> dict[str, str]:
    """Every paper-preset id with its real architecture's config.json and a tokenizer, but **no
    weights**: the weight file names every tensor and holds none (`_names_only`), so anything that loads
    it fails. Enough for `report-builder plan`, which reads configs, tokenizers, tensor names and file hashes only.

    Args:
        bert_vocab: tokenize every model with the embedded MiniLM's tokenizer (bert-base-uncased's real
            WordPiece vocabulary: real token lengths for the BERT family, near ones for the BPE models)
            instead of the tiny trained stand-ins.
    Returns:
        hub id -> snapshot revision.
    """
    hub = Path(hub)
    ids = paper_ids()
    work = Path(tempfile.mkdtemp(prefix="shapes-", dir=hub.parent if hub.parent.exists() else None))
    shared = hub / ".standin-blobs"
    shared.mkdir(parents=True, exist_ok=True)
    try:
        toks: dict[str, Path] = {}
        if bert_vocab:
            from report_builder.models.loading import config_and_tokenizer

            d = work / "tok-bert"
            config_and_tokenizer("minilm")[1].save_pretrained(str(d))
            toks = {fam: d for fam in set(ids.values())}
        else:
            lines = _offline_lines()
            for fam in sorted(set(ids.values())):
                d = work / f"tok-{fam}"
                (_train_wordpiece(lines, d) if fam == "bert" else _train_bpe(lines, d, fam))
                toks[fam] = d
        revs = {}
        for repo_id, fam in sorted(ids.items()):
            d = work / ("model-" + repo_id.replace("/", "--"))
            d.mkdir()
            cfg = _shape_config(repo_id, fam)
            cfg._name_or_path = repo_id
            cfg.save_pretrained(str(d))
            _names_only(cfg, d / "model.safetensors")
            files = {p.name: p for p in d.iterdir()}
            files.update({p.name: p for p in toks[fam].iterdir()})
            revs[repo_id] = _publish(hub, repo_id, files, shared)
        return revs
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------ data

def write_data_dir(root: str | Path, n: int = 6) -> Path:
    """Tiny SST-2, MNLI and CoNLL-2003 files in the layout ``--data-dir`` reads; returns ``root``.
    For ``n`` beyond the offline texts' 500 lines the lines repeat (numbered, so items differ)."""
    root = Path(root)
    base = _offline_lines(3 * n + 10)
    lines = [ln if k < len(base) else f"{k // len(base)}. {ln}" for k, ln in
             ((k, base[k % len(base)]) for k in range(3 * n + 10))]
    (root / "SST-2").mkdir(parents=True, exist_ok=True)
    (root / "SST-2" / "dev.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{ln[:120]}\t{k % 2}\n" for k, ln in enumerate(lines[:n])), encoding="utf-8")
    (root / "MNLI").mkdir(parents=True, exist_ok=True)
    head = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tgold_label\n"
    rows = "".join(f"{k}\t{k}\t{k}\tfiction\t{lines[n + k][:100]}\t{lines[2 * n + k][:60]}\tneutral\n"
                   for k in range(n))
    (root / "MNLI" / "dev_matched.tsv").write_text(head + rows, encoding="utf-8")
    (root / "conll2003").mkdir(parents=True, exist_ok=True)
    sents = ["EU rejects German call to boycott British lamb .", "Peter Blackburn visited New York City .",
             "The European Commission said on Thursday it disagreed .", "Japan began the defence of their title ."]
    body = "-DOCSTART- -X- -X- O\n\n" + "\n".join(
        "".join(f"{w} NN B-NP O\n" for w in sents[k % len(sents)].split()) for k in range(n))
    (root / "conll2003" / "valid.txt").write_text(body, encoding="utf-8")
    return root


if __name__ == "__main__":  # python -m tests.paper_standins HUB DATA [--shapes [N]]
    import sys
    import time

    t0 = time.perf_counter()
    if "--shapes" in sys.argv:  # real configs, BERT's real WordPiece, no weights; N-item data files
        k = sys.argv.index("--shapes")
        revs = build_shape_cache(sys.argv[1], bert_vocab=True)
        write_data_dir(sys.argv[2], n=int(sys.argv[k + 1]) if len(sys.argv) > k + 1 else 1000)
    else:
        revs = build_hub_cache(sys.argv[1])
        write_data_dir(sys.argv[2])
    print(json.dumps({"models": len(revs), "seconds": round(time.perf_counter() - t0, 1)}))
