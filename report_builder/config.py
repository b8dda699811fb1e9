"""Build configuration: frozen dataclasses, YAML loading with key-naming errors, presets, the thread policy.

Presets: ``default`` (offline: MiniLM + SmolLM2 on the offline sets; 7 min from an empty cache on an idle
2-core CPU, 2-3x that on busy cores),
``smoke`` (same models, a few sequences, for tests and quick looks), ``paper`` (the papers' models
and data; needs the model hub and a GPU). A YAML file may start from a preset (``preset: default``)
and override any key. The ``models:`` and ``datasets:`` entries and their checks live in `config_entries`.
Pitfall: every key that changes a result must reach the analyses' cache keys.
"""
from __future__ import annotations

import copy
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from report_builder import papers
from report_builder.schema import CHUNK_RULES
from report_builder.errors import ConfigError, for_terminal, option, shown
from report_builder.yamlsafe import load_yaml
from report_builder.values import (DEVICE_FORM, SITE_URL_MAX, TEMP_SIBLING_ROOM, check_path,  # noqa: F401
                                   check_site_url, plain_text)  # SITE_URL_MAX re-exported
from report_builder.config_entries import (COUNT_MAX, ROLES, DatasetConfig, ModelConfig,  # noqa: F401 - re-exported
                                           check_entries, check_models, count, need)


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
    dtype: str = "float32"  # precision mode of the pair GEMMs (schema.PRECISIONS); the model stays float32
    chunk_rule: str = "auto"  # auto | cpu | gpu: how the FF step is cut (decompose.chunks); auto = the device's
    batch_size: int | None = None  # sequences per padded batch on a GPU; None: as many as its free memory holds
    threads: int | None = None  # CPU worker threads (results do not depend on it); None = auto (choose_threads)
    shard_size: int | None = None  # split sequence analyses into shards of N sequences (results do not depend on it)
    max_memory: str = "1GiB"
    device_map: str = "none"  # none | auto | balanced | balanced_low_0 | sequential: spread a model over devices
    device_memory: str | None = None  # with device_map: the weights budget of each GPU (device cpu: of the CPU)
    ig: IGConfig = field(default_factory=IGConfig)
    k21: K21Config = field(default_factory=K21Config)
    k24: K24Config = field(default_factory=K24Config)
    cache_dir: str | None = None  # results cache; None: the default, `caches.default_dir` (the same from any directory)
    data_dir: str | None = None  # DIR/SST-2/dev.tsv, DIR/MNLI/dev_matched.tsv, DIR/conll2003/valid.txt
    out_dir: str = "site"
    site_url: str | None = None  # where the site will be published (mkdocs site_url: canonical links, sitemap)

    def __post_init__(self) -> None:
        if self.cache_dir is None:  # resolved here, so every reader sees a path
            from report_builder.caches import default_dir

            object.__setattr__(self, "cache_dir", default_dir())

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


SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
              "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
"""Size units, case-insensitive: decimal ``kB MB GB TB`` (powers of 1000) and binary ``KiB MiB GiB TiB``
(powers of 1024); a bare number is bytes. ``2GB`` = 2·10⁹ bytes, ``2GiB`` = 2·2³⁰."""
MAX_SIZE = 1 << 60
"""The largest size `parse_size` accepts (1 EiB): beyond any machine, and still an exact integer."""


def parse_size(s: str | int | float, *, key: str = "max_memory") -> int:
    """``"512MiB"``, ``"2GiB"``, ``"1.5GB"`` or a number of bytes -> bytes: the one size parser
    (config, CLI ``--max-memory``, bench). Raises `ConfigError` naming ``key`` and the units.

    A bare unit letter (``2G``) is refused: it is ambiguous between GB and GiB.
    """
    import re

    import math

    if isinstance(s, bool):
        raise ConfigError(f"{key}: expected a size such as 512MiB or 2GB, got {shown(s)}")
    try:
        if isinstance(s, (int, float)):
            value = float(s)
        else:
            m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(s)[:200])
            unit = m.group(2).lower() if m else ""
            if not m or (unit and unit not in SIZE_UNITS):
                raise ConfigError(f"{key}: cannot read {shown(s)} as a size; use a number with one of the units "
                                  f"kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 2GiB")
            value = float(m.group(1)) * SIZE_UNITS.get(unit, 1)
    except OverflowError:  # an integer too large for a float
        value = math.inf
    if not value > 0:  # NaN included
        raise ConfigError(f"{key}: must be a positive size, got {shown(s)}")
    if value > MAX_SIZE:  # inf included (1e400)
        raise ConfigError(f"{key}: {shown(s)} is larger than any machine's memory (at most 1 EiB = 2^60 bytes); "
                          "use a size such as 2GiB")
    return int(value)


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
        "models": papers.preset_models(),
        "datasets": papers.preset_datasets(),
        "device": "cuda",
        "max_memory": "16GiB",
    },
}


SECTIONS = ("models", "datasets", "ig", "k21", "k24", "figures", "preset")
"""The top-level keys `from_dict` reads itself (every other top-level key is a plain `Config` field)."""


def did_you_mean(key: Any, known: list[str]) -> str | None:
    """The known key closest to a misspelt ``key`` (``model`` -> ``models``, ``top-k`` -> ``top_k``), or None."""
    import difflib

    if not isinstance(key, str) or len(key) > 100:
        return None
    low = {k.lower(): k for k in known}
    plain = key.strip().lower().replace("-", "_")
    if plain in low:
        return low[plain]
    close = difflib.get_close_matches(plain, list(low), n=1, cutoff=0.75)
    return low[close[0]] if close else None


def _build(cls, data: Any, where: str):
    """Instantiate a dataclass from a mapping, naming unknown keys and type errors by path."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    for k in data:
        if k not in known:
            name = for_terminal(k) if isinstance(k, str) and len(k) <= 100 else shown(k, 100)
            guess = did_you_mean(k, list(known) + list(SECTIONS if cls is Config else ()))
            raise ConfigError(f"{where}.{name}: unknown key{f'; did you mean `{guess}`?' if guess else ''} "
                              f"(known: {', '.join(known)})")
    missing = [f.name for f in fields(cls) if f.name not in data
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {', '.join(missing)}")
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
            raise ConfigError(f"{path}: expected an integer, got {shown(v)}")
        elif t == "float" and not isinstance(v, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {shown(v)}")
        elif t == "bool" and not isinstance(v, bool):
            raise ConfigError(f"{path}: expected true or false, got {shown(v)}")
        elif t.startswith("str") and not isinstance(v, str) and not (v is None and "None" in t):
            raise ConfigError(f"{path}: expected a string, got {shown(v)}")
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
    top = [f.name for f in fields(Config)]
    for k in data:  # a misspelt key first (`model:` would otherwise read as "no models")
        if k not in top:
            _build(Config, {k: None}, "config")
    preset = data.get("preset", "custom")
    if not isinstance(preset, str):
        raise ConfigError(f"preset: expected a preset name ({', '.join(PRESETS)}), got {shown(preset)}")
    if preset != "custom":
        if preset not in PRESETS:
            guess = did_you_mean(preset, list(PRESETS))
            raise ConfigError(f"preset: unknown preset {shown(preset)}{f'; did you mean {guess}?' if guess else ''} "
                              f"(known: {', '.join(PRESETS)})")
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
    check_models(ms)
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
    return validate(cfg)


DEVICES = "cpu, cuda, cuda:<index>"
DTYPES = ("float32", "bfloat16", "float16", "tf32")
"""The precision modes (`schema.PRECISIONS`): float32, or the pair GEMMs in bfloat16, float16 or TF32 on a GPU."""
DEVICE_MAPS = ("none", "auto", "balanced", "balanced_low_0", "sequential")
"""``device_map`` modes (models/placement.py): one device, or accelerate's layer spread over the GPUs of a
node (what does not fit stays in CPU memory, then on disk); ``auto`` is ``balanced``."""
IG_METHODS = ("closed", "numerical")
FFAMP_NORMALISE = ("row",)


SEED_MAX = 2**32 - 1
"""The largest ``k21.seed`` (numpy's seed range)."""


def validate(cfg: Config) -> Config:
    """Check every value of a `Config`; raise `ConfigError` naming the key and the allowed values.

    Called by `from_dict`, `replace` and `overrides.with_model_items`, so CLI options are checked like YAML keys.
    Dataset and figure ids are checked against their registries, which sit above the configuration,
    by `housekeeping.check_ids` (the front runs it before any work).
    """
    need(isinstance(cfg.device, str) and DEVICE_FORM.fullmatch(cfg.device) is not None, "device",
         f"{shown(cfg.device)} is not one of {DEVICES}")
    need(cfg.dtype in DTYPES, "dtype", f"{shown(cfg.dtype)} is not one of {', '.join(DTYPES)}")
    need(cfg.dtype == "float32" or cfg.device != "cpu", "dtype",
         f"{cfg.dtype} is not faster than float32 on a CPU (no tensor cores there); use float32, or a GPU")
    need(cfg.chunk_rule in CHUNK_RULES, "chunk_rule", f"{shown(cfg.chunk_rule)} is not one of {', '.join(CHUNK_RULES)}")
    need(cfg.chunk_rule != "cpu" or cfg.dtype == "float32", "chunk_rule",
         f"dtype {cfg.dtype} runs the GPU rule's FF step; use chunk_rule gpu or auto")
    count(cfg.batch_size, "batch_size", optional=True)
    count(cfg.threads, "threads", optional=True)
    count(cfg.shard_size, "shard_size", optional=True)
    parse_size(cfg.max_memory, key="max_memory")
    need(cfg.device_map in DEVICE_MAPS, "device_map", f"{shown(cfg.device_map)} is not one of {', '.join(DEVICE_MAPS)}")
    need(cfg.device_map == "none" or cfg.device in ("cpu", "cuda"), "device_map",
         f"spreads over every visible GPU: set device: cuda, not {shown(cfg.device)} (CUDA_VISIBLE_DEVICES picks the GPUs)")
    if cfg.device_memory is not None:
        parse_size(cfg.device_memory, key="device_memory")
        need(cfg.device_map != "none", "device_memory", "applies to a device map only; set device_map: auto")
    need(cfg.ig.method in IG_METHODS, "ig.method", f"{shown(cfg.ig.method)} is not one of {', '.join(IG_METHODS)}")
    count(cfg.ig.steps, "ig.steps")
    mr = cfg.k21.mask_rate
    need(isinstance(mr, (int, float)) and not isinstance(mr, bool) and 0 < mr < 1, "k21.mask_rate",
         f"expected a fraction strictly between 0 and 1 (e.g. 0.12), got {shown(mr)}")
    count(cfg.k21.seed, "k21.seed", low=0, high=SEED_MAX)
    for k, sentence in enumerate(cfg.k21.example):
        plain_text(sentence, f"k21.example[{k}]")
    count(cfg.k24.top_k, "k24.top_k")
    count(cfg.k24.examples, "k24.examples")
    need(cfg.k24.ffamp_normalise in FFAMP_NORMALISE, "k24.ffamp_normalise",
         f"{shown(cfg.k24.ffamp_normalise)} is not one of {', '.join(FFAMP_NORMALISE)}")
    if cfg.site_url is not None:
        url = check_site_url(cfg.site_url)
        if url != cfg.site_url:
            cfg = Config(**{**{f.name: getattr(cfg, f.name) for f in fields(cfg)}, "site_url": url})
    check_entries(cfg.models, cfg.datasets)
    check_path(cfg.out_dir, "out_dir", reserve=TEMP_SIBLING_ROOM)
    check_path(cfg.cache_dir, _cache_key(cfg.cache_dir))
    for key, v in [("data_dir", cfg.data_dir), *((f"datasets[{k}].path", d.path) for k, d in enumerate(cfg.datasets))]:
        if v is not None:
            check_path(v, key)
    if isinstance(cfg.figures, str):
        need(cfg.figures == "all", "figures", f"expected `all` or a list of figure ids, got {shown(cfg.figures)}")
    return expand_paths(cfg)


def _cache_key(cache_dir: Any) -> str:
    """How messages name ``cache_dir``: the environment variable it came from when it is the default."""
    from report_builder.guard import placed_by

    env = placed_by(cache_dir) if isinstance(cache_dir, str) and cache_dir.strip() else None
    return f"{env} (the environment variable that places the default results cache)" if env else "cache_dir"


def expand_paths(cfg: Config) -> Config:
    """``cfg`` with ``~`` expanded the same way in every path key: ``out_dir``, ``cache_dir``,
    ``data_dir``, each dataset's ``path`` and each model ``source`` that starts with ``~`` (hub ids
    and embedded names never do). A YAML ``out_dir: "~"`` is the home directory (then refused as an
    output), never a folder named ``~``."""
    import os
    from dataclasses import replace as _replace

    def ex(v: Any) -> Any:
        return os.path.expanduser(v) if isinstance(v, str) and v.startswith("~") else v

    return _replace(cfg, out_dir=ex(cfg.out_dir), cache_dir=ex(cfg.cache_dir), data_dir=ex(cfg.data_dir),
                    models=tuple(_replace(m, source=ex(m.source)) for m in cfg.models),
                    datasets=tuple(_replace(d, path=ex(d.path)) for d in cfg.datasets))


CONFIG_FILE_MAX = 16 << 20  # the most bytes of a configuration file read (a device such as /dev/zero never ends)


def load_config(path: str | Path | None = None, *, preset: str | None = None) -> Config:
    """Load a YAML config file, or a preset by name (``default`` when neither is given)."""
    if path is not None:
        check_path(str(path), option("config"))
        p = Path(path)
        if not p.exists():  # `rb.build("smok")`: a preset's name misspelt reads as a file name
            guess = did_you_mean(str(path), list(PRESETS)) if not p.suffix and len(p.parts) == 1 else None
            raise ConfigError(f"config file {p} does not exist" + (f"; did you mean the preset {guess!r}?" if guess else ""))
        try:
            with open(p, "rb") as f:  # bounded: `--config /dev/zero` read until memory ran out
                raw = f.read(CONFIG_FILE_MAX + 1)
            if len(raw) > CONFIG_FILE_MAX:
                raise ConfigError(f"{p}: more than {CONFIG_FILE_MAX >> 20} MiB, not a configuration file (one is a "
                                  "few KiB of YAML)")
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"{p}: not UTF-8 text (byte {e.start}: {e.reason}); save the file as UTF-8") from None
        except OSError as e:
            raise ConfigError(f"{p}: cannot be read ({e.strerror}); check the path and its permissions") from None
        data = load_yaml(text, str(p))
        if preset is not None:
            data = {**(data or {}), "preset": preset}
        return from_dict(data, source=str(p))
    return from_dict({"preset": preset or "default"})


def replace(cfg: Config, **changes) -> Config:
    """``cfg`` with top-level ``changes`` (CLI options), validated like a YAML file."""
    return validate(Config(**{**{f.name: getattr(cfg, f.name) for f in fields(cfg)}, **changes}))


def as_config(config: Any = "default", **changes) -> Config:
    """A `Config` from a preset name (``"default"``, ``"smoke"``, ``"paper"``), a YAML file path, a
    mapping as in the YAML file or a ``Config``, with top-level ``changes`` applied (as `replace`)."""
    import os

    if isinstance(config, Config):
        cfg = config
    elif isinstance(config, dict):
        cfg = from_dict(config)
    elif isinstance(config, (str, os.PathLike)) and str(config) in PRESETS:
        cfg = load_config(preset=str(config))
    elif isinstance(config, (str, os.PathLike)):
        cfg = load_config(config)
    else:
        raise TypeError("config: expected a preset name, a YAML file path, a mapping or a Config")
    return replace(cfg, **changes) if changes else cfg


def choose_threads(requested: int | None) -> int:
    """The thread policy: CPU worker threads for a build (``threads``, `engine.set_cpu_workers`): as
    configured, else all cores on an idle machine and one thread when other work keeps the cores busy
    (OpenMP barriers then stall each small op for a scheduler slice: measured 10x slower on 2 busy cores)."""
    import os

    cores = os.cpu_count() or 1
    if requested:
        return max(1, int(requested))
    try:
        busy = os.getloadavg()[0] >= max(1.0, cores - 0.5)
    except OSError:
        busy = False
    return 1 if busy else cores
