"""The one table of facts about the two reproduced papers (torch-free, no rendering imports).

What lives here: each paper's title, authors, venue, BibTeX, site page and intro document
(`PAPERS`); the models and datasets of the ``paper`` preset (`PRESET_MODELS`, `PRESET_DATASETS`),
from which `config.PRESETS["paper"]` is built; the paper models' shapes and the datasets' split
sizes (`PAPER_SHAPES`, `PaperDataset.split_size`), which size a plan before anything is downloaded
(`costs.sizing`; the mean token lengths are the paper's Table 1, in ``resources/k21_reported.yaml``); the roles the K21 appendix figures name (the seven
model variants in figure order, the MultiBERTs seed group, the non-Wikipedia datasets); and the
example configuration the K24 "not configured" messages suggest. The site (page titles, cite page,
provenance), the figures (captions, config snippets) and the config read them from here.

Pitfall: a fact is written once. The paper preset names its models by their hub id, while the K21
snippets use the short ``PaperModel.name``; both come from the same rows, so never retype a model
list or a dataset size elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """One reproduced paper.

    Attributes:
        key: ``"K21"`` or ``"K24"`` (the ``paper`` field of every `FigureSpec`).
        title: the paper's title.
        authors: authors in citation order.
        venue: short venue and year, e.g. ``"EMNLP 2021"``.
        arxiv: arXiv identifier.
        bibtex: the BibTeX entry shown on the cite page and in each figure's ``cite.bib``.
        page: the generated site page holding its figures.
        intro_doc: the hand-written intro fragment in ``docs/`` shown at the top of that page.
    """

    key: str
    title: str
    authors: tuple[str, ...]
    venue: str
    arxiv: str
    bibtex: str
    page: str
    intro_doc: str

    @property
    def short_name(self) -> str:
        """``"Kobayashi et al. (EMNLP 2021)"``: first author's surname, et al., venue."""
        return f"{self.authors[0].split(',')[0]} et al. ({self.venue})"


_AUTHORS = ("Kobayashi, Goro", "Kuribayashi, Tatsuki", "Yokoi, Sho", "Inui, Kentaro")

PAPERS: dict[str, Paper] = {
    "K21": Paper(
        key="K21",
        title="Incorporating Residual and Normalization Layers into Analysis of Masked Language Models",
        authors=_AUTHORS, venue="EMNLP 2021", arxiv="2109.07152", page="k21.md", intro_doc="k21_intro.md",
        bibtex="""@inproceedings{kobayashi-etal-2021-incorporating,
  title     = {Incorporating Residual and Normalization Layers into Analysis of Masked Language Models},
  author    = {Kobayashi, Goro and Kuribayashi, Tatsuki and Yokoi, Sho and Inui, Kentaro},
  booktitle = {Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year      = {2021},
  publisher = {Association for Computational Linguistics},
  eprint    = {2109.07152},
  archivePrefix = {arXiv},
}"""),
    "K24": Paper(
        key="K24",
        title="Analyzing Feed-Forward Blocks in Transformers through the Lens of Attention Maps",
        authors=_AUTHORS, venue="ICLR 2024", arxiv="2302.00456", page="k24.md", intro_doc="k24_intro.md",
        bibtex="""@inproceedings{kobayashi2024analyzing,
  title     = {Analyzing Feed-Forward Blocks in Transformers through the Lens of Attention Maps},
  author    = {Kobayashi, Goro and Kuribayashi, Tatsuki and Yokoi, Sho and Inui, Kentaro},
  booktitle = {The Twelfth International Conference on Learning Representations (ICLR)},
  year      = {2024},
  eprint    = {2302.00456},
  archivePrefix = {arXiv},
}"""),
}


def paper(key: str) -> Paper:
    """The paper with this key; a clear error for an unknown one."""
    try:
        return PAPERS[key]
    except KeyError:
        raise ValueError(f"unknown paper {key!r} (expected one of {', '.join(PAPERS)})") from None


@dataclass(frozen=True)
class PaperModel:
    """A model the papers used: a short report ``name``, its hub ``source`` and its figure ``role``."""

    name: str
    source: str
    role: str


@dataclass(frozen=True)
class PaperDataset:
    """A dataset of the paper setting: id, the paper's sample count ``n``, the K24 subset size and the
    number of items of the whole split the builder reads (``split_size``: SST-2 dev, MNLI dev-matched
    pairs, CoNLL-2003 validation sentences, the offline Wikipedia pairs)."""

    id: str
    n: int
    k24_n: int
    split_size: int = 0


#: K21's primary encoder (Table 2, Fig. 3) and the causal model the paper preset pairs with it.
PRIMARY_ENCODER = PaperModel("bert-base-uncased", "bert-base-uncased", "primary_encoder")
PRIMARY_CAUSAL = PaperModel("gpt2", "gpt2", "primary_causal")

#: K21's model variants in the order of its appendix figures (fig5 … fig11).
K21_VARIANTS: tuple[PaperModel, ...] = tuple(PaperModel(n, s, "variant") for n, s in (
    ("bert-large", "bert-large-uncased"),
    ("bert-medium", "prajjwal1/bert-medium"),
    ("bert-small", "prajjwal1/bert-small"),
    ("bert-mini", "prajjwal1/bert-mini"),
    ("bert-tiny", "prajjwal1/bert-tiny"),
    ("roberta-base", "roberta-base"),
    ("roberta-large", "roberta-large"),
))

#: The seed group of K21's appendix (25 MultiBERTs seeds).
N_SEEDS = 25
#: Hub-id prefix shared by the seed group's models (the paper's numbers are matched on it).
SEED_GROUP_PREFIX = "google/multiberts"
SEED_GROUP: tuple[PaperModel, ...] = tuple(
    PaperModel(f"multiberts-seed_{s}", f"{SEED_GROUP_PREFIX}-seed_{s}", "seed_group") for s in range(N_SEEDS))

#: The paper setting's datasets: the primary (Wikipedia) set first, then K21's appendix sets (fig12 … fig14).
PRESET_DATASETS: tuple[PaperDataset, ...] = (
    PaperDataset("wiki", 992, 256, split_size=992),
    PaperDataset("sst2", 872, 256, split_size=872),
    PaperDataset("mnli", 1000, 256, split_size=9815),
    PaperDataset("conll2003", 1000, 256, split_size=3250),
)
PRIMARY_DATASET = PRESET_DATASETS[0]
EXTRA_DATASETS: tuple[PaperDataset, ...] = PRESET_DATASETS[1:]


@dataclass(frozen=True)
class ModelShape:
    """A paper model's architecture, recorded so a plan can price it before its config is downloaded.

    Attributes:
        model_type: the HF ``config.model_type`` (``bert``, ``roberta``, ``gpt2``).
        d, layers, heads, ff, vocab, positions: model size, layers, attention heads, FF size,
            vocabulary and position embeddings, as in the model's ``config.json``.
    """

    model_type: str
    d: int
    layers: int
    heads: int
    ff: int
    vocab: int
    positions: int

    def config_kwargs(self) -> dict:
        """These numbers under the HF config's own names for ``model_type``."""
        if self.model_type == "gpt2":
            return dict(n_embd=self.d, n_layer=self.layers, n_head=self.heads, n_inner=self.ff,
                        vocab_size=self.vocab, n_positions=self.positions)
        return dict(hidden_size=self.d, num_hidden_layers=self.layers, num_attention_heads=self.heads,
                    intermediate_size=self.ff, vocab_size=self.vocab, max_position_embeddings=self.positions)


_BERT_BASE = ModelShape("bert", 768, 12, 12, 3072, 30522, 512)

#: Hub id -> architecture of every model of the ``paper`` preset (from each model's ``config.json``).
PAPER_SHAPES: dict[str, ModelShape] = {
    "bert-base-uncased": _BERT_BASE,
    "gpt2": ModelShape("gpt2", 768, 12, 12, 3072, 50257, 1024),
    "bert-large-uncased": ModelShape("bert", 1024, 24, 16, 4096, 30522, 512),
    "prajjwal1/bert-medium": ModelShape("bert", 512, 8, 8, 2048, 30522, 512),
    "prajjwal1/bert-small": ModelShape("bert", 512, 4, 8, 2048, 30522, 512),
    "prajjwal1/bert-mini": ModelShape("bert", 256, 4, 4, 1024, 30522, 512),
    "prajjwal1/bert-tiny": ModelShape("bert", 128, 2, 2, 512, 30522, 512),
    "roberta-base": ModelShape("roberta", 768, 12, 12, 3072, 50265, 514),
    "roberta-large": ModelShape("roberta", 1024, 24, 16, 4096, 50265, 514),
    **{m.source: _BERT_BASE for m in SEED_GROUP},  # MultiBERTs: BERT-base, uncased vocabulary
}


def paper_sample_count(dataset: str) -> int:
    """The paper's sample count for a dataset id (``wikipedia`` is the primary set; others 1000)."""
    sizes = {d.id: d.n for d in PRESET_DATASETS}
    if dataset == "wikipedia":
        return PRIMARY_DATASET.n
    return sizes.get(dataset, 1000)


def preset_models() -> list[dict]:
    """The ``paper`` preset's model entries: the primaries, then the variants and the seed group,
    each named by its hub id (as `config.PRESETS["paper"]` has always named them)."""
    out = [{"name": m.source, "source": m.source, "role": m.role} for m in (PRIMARY_ENCODER, PRIMARY_CAUSAL)]
    out += [{"name": m.source, "source": m.source, "role": m.role} for m in K21_VARIANTS]
    out += [{"name": m.name, "source": m.source, "role": m.role} for m in SEED_GROUP]
    return out


def preset_datasets() -> list[dict]:
    """The ``paper`` preset's dataset entries."""
    return [{"id": d.id, "n": d.n, "k24_n": d.k24_n} for d in PRESET_DATASETS]


#: The configuration the K24 "not configured" messages suggest: the two embedded models, two
#: variants with the other layer layout, and small samples of the offline datasets.
K24_EXAMPLE_ENCODER = PaperModel("all-MiniLM-L6-v2", "minilm", "primary_encoder")
K24_EXAMPLE_CAUSAL = PaperModel("SmolLM2-135M-Instruct", "smollm2", "primary_causal")
K24_EXAMPLE_VARIANTS: tuple[PaperModel, ...] = (
    PaperModel("bert-base-uncased", "bert-base-uncased", "variant"), PaperModel("gpt2", "gpt2", "variant"))
K24_EXAMPLE_DATASETS: tuple[tuple[str, int], ...] = (("wiki", 200), ("sentiment-sample", 200))
