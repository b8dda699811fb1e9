"""Build configuration: frozen dataclasses, YAML loading with key-naming errors, and presets.

Presets: ``default`` (offline: MiniLM + SmolLM2 on the offline sets, ~15 min on 2 cores),
``smoke`` (same models, a few sequences, for tests and quick looks), ``paper`` (the papers' models
and data; needs the model hub and a GPU). A YAML file may start from a preset (``preset: default``)
and override any key. Pitfall: every key that changes a result must reach the analyses' cache keys.
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from report_builder.errors import ConfigError

ROLES = ("primary_encoder", "primary_causal", "variant", "seed_group")


@dataclass(frozen=True)
class ModelConfig:
    """A model: report ``name``, ``source`` (embedded name, local dir or hub id) and ``role``."""

    name: str
    source: str
    role: str = "variant"


@dataclass(frozen=True)
class DatasetConfig:
    """An evaluation set: ``id``, sequences for K21 (``n``) and for the K24 full-layer analyses
    (``k24_n``), an optional local ``path``, and ``max_length`` in tokens.

    An id that is not built in is the user's own data: ``path`` to a ``.txt`` (one text per line),
    ``.jsonl`` or ``.csv``/``.tsv`` file (with ``column`` and optionally ``pair_column``), or
    ``hub`` (a ``datasets`` id, with ``column``, optional ``subset`` and ``split``); ``name``,
    ``domain`` and ``licence`` fill its datasheet (see ``report_builder.data.custom``)."""

    id: str
    n: int | None = None
    k24_n: int | None = 16
    path: str | None = None
    max_length: int = 128
    column: str | None = None
    pair_column: str | None = None
    hub: str | None = None
    subset: str | None = None
    split: str | None = None
    name: str | None = None
    domain: str | None = None
    licence: str | None = None


@dataclass(frozen=True)
class IGConfig:
    method: str = "closed"  # closed | numerical
    steps: int = 64


@dataclass(frozen=True)
class K21Config:
    mask_rate: float = 0.12
    seed: int = 0
    example: tuple[str, str] = ("The man went to the store.", "He bought a gallon of milk.")


@dataclass(frozen=True)
class K24Config:
    top_k: int = 20
    examples: int = 3
    include_special: bool = True
    ffamp_normalise: str = "row"  # rows of each map normalised to sum 1 before the difference


@dataclass(frozen=True)
class Config:
    """A resolved build configuration (written beside the outputs as ``config.resolved.yaml``)."""

    preset: str = "custom"
    models: tuple[ModelConfig, ...] = ()
    datasets: tuple[DatasetConfig, ...] = ()
    figures: tuple[str, ...] | str = "all"
    device: str = "cpu"
    dtype: str = "float32"
    batch_size: int = 8
    threads: int | None = None  # CPU worker threads (results do not depend on it); None = auto (api.choose_threads)
    max_memory: str = "1GiB"
    ig: IGConfig = field(default_factory=IGConfig)
    k21: K21Config = field(default_factory=K21Config)
    k24: K24Config = field(default_factory=K24Config)
    cache_dir: str = ".cache/report_builder"
    out_dir: str = "site"
    site_url: str | None = None  # where the site will be published (mkdocs site_url: canonical links, sitemap)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["models"] = [asdict(m) for m in self.models]
        d["datasets"] = [asdict(x) for x in self.datasets]
        d["k21"]["example"] = list(self.k21.example)
        if not isinstance(self.figures, str):
            d["figures"] = list(self.figures)
        return d

    def budget_bytes(self) -> int:
        return parse_size(self.max_memory)


def parse_size(s: str | int) -> int:
    """``"512MiB"``, ``"2GiB"``, ``"1.5GB"`` or a number of bytes -> bytes."""
    if isinstance(s, (int, float)):
        return int(s)
    t = str(s).strip().lower().replace(" ", "")
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "b": 1}
    for u, mult in units.items():
        if t.endswith(u):
            return int(float(t[: -len(u)]) * mult)
    return int(float(t))


PRESETS: dict[str, dict] = {
    "default": {
        "models": [
            {"name": "MiniLM-L6", "source": "minilm", "role": "primary_encoder"},
            {"name": "SmolLM2-135M", "source": "smollm2", "role": "primary_causal"},
        ],
        "datasets": [
            {"id": "wiki", "n": 256, "k24_n": 24},
            {"id": "sentiment-sample", "n": 200, "k24_n": 16},
            {"id": "news-sample", "n": 200, "k24_n": 16},
        ],
    },
    "smoke": {
        "models": [
            {"name": "MiniLM-L6", "source": "minilm", "role": "primary_encoder"},
            {"name": "SmolLM2-135M", "source": "smollm2", "role": "primary_causal"},
        ],
        "datasets": [
            {"id": "wiki", "n": 6, "k24_n": 2, "max_length": 64},
            {"id": "sentiment-sample", "n": 4, "k24_n": 2, "max_length": 64},
        ],
        "k24": {"top_k": 10, "examples": 2},
    },
    "paper": {
        "models": (
            [{"name": "bert-base-uncased", "source": "bert-base-uncased", "role": "primary_encoder"},
             {"name": "gpt2", "source": "gpt2", "role": "primary_causal"}]
            + [{"name": m, "source": m, "role": "variant"} for m in (
                "bert-large-uncased", "prajjwal1/bert-medium", "prajjwal1/bert-small", "prajjwal1/bert-mini",
                "prajjwal1/bert-tiny", "roberta-base", "roberta-large")]
            + [{"name": f"multiberts-seed_{k}", "source": f"google/multiberts-seed_{k}", "role": "seed_group"}
               for k in range(25)]
        ),
        "datasets": [
            {"id": "wiki", "n": 992, "k24_n": 256},
            {"id": "sst2", "n": 872, "k24_n": 256},
            {"id": "mnli", "n": 1000, "k24_n": 256},
            {"id": "conll2003", "n": 1000, "k24_n": 256},
        ],
        "device": "cuda",
        "batch_size": 32,
        "max_memory": "16GiB",
    },
}


def _build(cls, data: Any, where: str):
    """Instantiate a dataclass from a mapping, naming unknown keys and type errors by path."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    for k in data:
        if k not in known:
            raise ConfigError(f"{where}.{k}: unknown key (known: {', '.join(known)})")
    kw = {}
    for k, v in data.items():
        f = known[k]
        t = str(f.type)
        path = f"{where}.{k}"
        if k == "example":
            if not (isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(s, str) for s in v)):
                raise ConfigError(f"{path}: expected a list of two sentences")
            v = tuple(v)
        elif t.startswith("int") and not (isinstance(v, int) and not isinstance(v, bool)) and not (v is None and "None" in t):
            raise ConfigError(f"{path}: expected an integer, got {v!r}")
        elif t == "float" and not isinstance(v, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {v!r}")
        elif t == "bool" and not isinstance(v, bool):
            raise ConfigError(f"{path}: expected true or false, got {v!r}")
        elif t.startswith("str") and not isinstance(v, str) and not (v is None and "None" in t):
            raise ConfigError(f"{path}: expected a string, got {v!r}")
        kw[k] = v
    try:
        return cls(**kw)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def from_dict(data: dict, *, source: str = "config") -> Config:
    """Validate a configuration mapping (optionally starting from ``preset:``) into a `Config`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys (models, datasets, …)")
    preset = data.get("preset", "custom")
    if preset != "custom":
        if preset not in PRESETS:
            raise ConfigError(f"preset: unknown preset {preset!r} (known: {', '.join(PRESETS)})")
        data = _merge(PRESETS[preset], {k: v for k, v in data.items()})
    data = dict(data)
    models = data.pop("models", None)
    datasets = data.pop("datasets", None)
    if not models:
        raise ConfigError("models: at least one model is needed, e.g. `- {name: MiniLM-L6, source: minilm, role: primary_encoder}`")
    if not datasets:
        raise ConfigError("datasets: at least one dataset is needed, e.g. `- {id: wiki, n: 64}`")
    if not isinstance(models, list):
        raise ConfigError("models: expected a list of {name, source, role}")
    if not isinstance(datasets, list):
        raise ConfigError("datasets: expected a list of {id, n, k24_n, path, max_length}")
    ms = tuple(_build(ModelConfig, m, f"models[{k}]") for k, m in enumerate(models))
    for k, m in enumerate(ms):
        if m.role not in ROLES:
            raise ConfigError(f"models[{k}].role: {m.role!r} is not one of {', '.join(ROLES)}")
    names = [m.name for m in ms]
    if len(set(names)) != len(names):
        raise ConfigError("models: model names must be unique")
    ds = tuple(_build(DatasetConfig, d, f"datasets[{k}]") for k, d in enumerate(datasets))
    for k, d in enumerate(ds):
        if d.n is not None and d.n < 1:
            raise ConfigError(f"datasets[{k}].n: must be at least 1")
    kw: dict[str, Any] = {"models": ms, "datasets": ds, "preset": preset}
    for key, cls in (("ig", IGConfig), ("k21", K21Config), ("k24", K24Config)):
        if key in data:
            kw[key] = _build(cls, data.pop(key), key)
    if "figures" in data:
        f = data.pop("figures")
        if f != "all" and not (isinstance(f, list) and all(isinstance(x, str) for x in f)):
            raise ConfigError("figures: expected `all` or a list of figure ids")
        kw["figures"] = f if f == "all" else tuple(f)
    top = _build(Config, data, "config") if data else None
    base = asdict(top) if top else {}
    base = {k: v for k, v in base.items() if k in data}
    cfg = Config(**{**base, **kw})
    if cfg.ig.method not in ("closed", "numerical"):
        raise ConfigError("ig.method: expected `closed` or `numerical`")
    if cfg.site_url is not None and not cfg.site_url.startswith(("https://", "http://")):
        raise ConfigError(f"site_url: expected the published address, e.g. https://example.org/report/, "
                          f"got {cfg.site_url!r}")
    if cfg.dtype not in ("float32", "bfloat16", "float16"):
        raise ConfigError("dtype: expected float32, bfloat16 or float16")
    try:
        cfg.budget_bytes()
    except ValueError:
        raise ConfigError(f"max_memory: cannot read {cfg.max_memory!r} as a size (e.g. 512MiB, 2GiB)") from None
    return cfg


def load_config(path: str | Path | None = None, *, preset: str | None = None) -> Config:
    """Load a YAML config file, or a preset by name (``default`` when neither is given)."""
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"config file {p} does not exist")
        try:
            data = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: not valid YAML: {e}") from None
        if preset is not None:
            data = {**(data or {}), "preset": preset}
        return from_dict(data, source=str(p))
    return from_dict({"preset": preset or "default"})


def with_models(cfg: Config, sources: list[str], roles: list[str]) -> Config:
    """Replace the configured models (CLI ``--model``)."""
    import os

    def name(s: str) -> str:  # a local path is named by its folder (no local path in the report)
        return os.path.basename(os.path.normpath(s)) if os.path.exists(os.path.expanduser(s)) else s

    ms = tuple(ModelConfig(name=name(s), source=s, role=r) for s, r in zip(sources, roles))
    return Config(**{**{f.name: getattr(cfg, f.name) for f in fields(cfg)}, "models": ms})


def replace(cfg: Config, **changes) -> Config:
    return Config(**{**{f.name: getattr(cfg, f.name) for f in fields(cfg)}, **changes})
