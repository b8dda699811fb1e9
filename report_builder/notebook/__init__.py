"""The notebook API: decompose a model's layers for your own texts and look at the results in Python.

```python
import report_builder as rb

res = rb.decompose("minilm", ["The cat sat on the mat.", ("A premise.", "A hypothesis.")])
res.map(layer=3, scope="ATB")          # torch.Tensor (n, n): ||z_{i<-j}|| of sequence 0
res[1].ratios[3]["ATTNRESLN-N"]         # torch.Tensor (n,): K21 context-mixing ratio in [0, 1]
res[0].bias[3]["ATB"]                   # the token-independent bias term of that scope
res.max_error                           # largest relative reconstruction error vs the HF forward
res.to_frame("k24_maps")                # tidy pandas DataFrame with the result table's columns
res.plot(3, "ATB")                      # an Altair chart (imports the render side lazily)

tables = rb.load_results(".cache/report_builder")   # the last build's result tables
rb.build("smoke", out_dir="my-site")                # the whole report: `api.build`, as `report-builder build`
```

``decompose`` works on any model the report supports: an embedded name (``minilm``, ``smollm2``), a
local directory, a hub id, a model already loaded with [`load_model`][report_builder.notebook.load_model], or a
``(transformers model, tokenizer)`` pair. Every result carries its reconstruction error, measured
against the unmodified Hugging Face forward pass. Pitfall: this module imports torch when
``decompose`` is called, never when ``report_builder`` is imported (see ``report_builder.__init__``),
and nothing here renders unless ``plot`` is called.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import pandas as pd

from report_builder import schema

if TYPE_CHECKING:  # pragma: no cover - for the type checker and the API docs only
    import altair as alt
    import torch

    from report_builder.models.loading import LoadedModel

NOTEBOOK_DATASET = "notebook"
"""The ``dataset`` column of frames built from texts passed to [`decompose`][report_builder.notebook.decompose]."""

FRAME_TABLES = ("k24_maps", "k21_maps", "k21_tokens", "recon_errors")
"""Result tables [`to_frame`][report_builder.notebook.Decomposition.to_frame] can produce (columns as in ``schema.TABLES``)."""


@dataclass
class SequenceResult:
    """The decomposition of one text (or text pair).

    Attributes:
        text: The text the tokens come from (pairs: ``text_a + "\\n" + text_b`` for encoders).
        tokens: The tokenizer's token strings, length ``n``.
        categories: K21 token category per token (``Normal``, ``[CLS]``, ``[SEP]``, ``[MASK]``).
        maps: layer -> scope or K21 method -> ``(n, n)`` float32 tensor ``||z_{i<-j}||`` (row ``i`` the
            output token, column ``j`` the source token; the bias term is never in a map).
        ratios: layer -> K21 method -> ``(n,)`` context-mixing ratio in [0, 1].
        bias: layer -> check point -> the bias term ``z_{i<-bias}``, ``(n, d)`` or ``(d,)`` (broadcasts).
        errors: layer -> check point -> ``max_i ||sum_j z_{i<-j} + z_{i<-bias} - z_i|| / ||z_i||``.
    """

    text: str
    tokens: list[str]
    categories: list[str]
    maps: dict[int, dict[str, "torch.Tensor"]] = field(default_factory=dict)
    ratios: dict[int, dict[str, "torch.Tensor"]] = field(default_factory=dict)
    bias: dict[int, dict[str, "torch.Tensor"]] = field(default_factory=dict)
    errors: dict[int, dict[str, float]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Decomposition:
    """What [`decompose`][report_builder.notebook.decompose] returns: one [`SequenceResult`][report_builder.notebook.SequenceResult] per text, plus what was computed.

    Attributes:
        model: The model's name.
        layout: The layer layout (``schema.POST_LN`` or ``schema.PRE_LN``): its scopes, checks, label.
        causal: Whether the model is decoder-only (its maps are lower-triangular).
        layers: The decomposed layers (0-based).
        scopes: The K24 scopes whose maps were computed.
        methods: The K21 methods whose maps were computed.
        sequences: One result per input text, in input order.
    """

    model: str
    layout: schema.Layout
    causal: bool
    layers: tuple[int, ...]
    scopes: tuple[str, ...]
    methods: tuple[str, ...]
    sequences: list[SequenceResult]

    def __len__(self) -> int:
        return len(self.sequences)

    def __getitem__(self, seq: int) -> SequenceResult:
        return self.sequences[seq]

    def __iter__(self):
        return iter(self.sequences)

    def __repr__(self) -> str:
        return (f"Decomposition(model={self.model!r}, {self.layout.label}, {len(self)} sequence(s), "
                f"layers={list(self.layers)}, scopes={list(self.scopes)}, methods={list(self.methods)}, "
                f"max_error={self.max_error:.2e})")

    @property
    def max_error(self) -> float:
        """The largest relative reconstruction error over every sequence, layer and check point."""
        return max((e for s in self.sequences for per in s.errors.values() for e in per.values()), default=0.0)

    def map(self, layer: int, scope: str, seq: int = 0) -> "torch.Tensor":
        """The ``(n, n)`` map of one scope (or K21 method) at one layer for one sequence.

        Args:
            layer: 0-based layer.
            scope: A scope or K21 method that was decomposed.
            seq: Which sequence.

        Raises:
            KeyError: The layer or scope was not computed (the message lists what was).
        """
        s = self.sequences[seq]
        if layer not in s.maps:
            raise KeyError(f"layer {layer} was not decomposed; layers: {list(self.layers)}")
        if scope not in s.maps[layer]:
            raise KeyError(f"no map {scope!r}; computed: {', '.join(s.maps[layer]) or 'none'}")
        return s.maps[layer][scope]

    def example_name(self, seq: int) -> str:
        """The ``example`` label of one sequence in the frames and charts: ``"<k+1>: <first words>…"``."""
        words = self.sequences[seq].text.split()
        return f"{seq + 1}: {' '.join(words[:6])}{'…' if len(words) > 6 else ''}"

    def to_frame(self, table: str = "k24_maps", *, dataset: str = NOTEBOOK_DATASET) -> pd.DataFrame:
        """The results as a tidy DataFrame with the columns of one result table (ARCHITECTURE.md).

        Args:
            table: ``"k24_maps"`` (scope maps, each row normalised to sum 1, valid pairs only: ``j <= i``
                for causal models — as on the site), ``"k21_maps"`` (the K21 methods' raw maps, all
                pairs), ``"k21_tokens"`` (per-token ratios in percent), or ``"recon_errors"``.
            dataset: The ``dataset`` column where the table has one.

        Returns:
            One row per observation, columns in ``schema.TABLES[table]`` order.

        Raises:
            ValueError: An unknown table, or one whose maps were not computed.
        """
        import numpy as np

        if table not in FRAME_TABLES:
            raise ValueError(f"unknown table {table!r}; choose one of {', '.join(FRAME_TABLES)}")
        cols = schema.TABLES[table]
        rows: list[pd.DataFrame] = []
        if table in ("k24_maps", "k21_maps"):
            names = self.scopes if table == "k24_maps" else self.methods
            if not names:
                what = "scopes" if table == "k24_maps" else "methods"
                raise ValueError(f"no {what} were decomposed; call decompose(..., {what}='all')")
            key = "scope" if table == "k24_maps" else "method"
            for k, s in enumerate(self.sequences):
                n = len(s)
                ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
                valid = _valid_pairs(n, self.causal) if table == "k24_maps" else np.ones((n, n), bool)
                toks = np.asarray(s.tokens, dtype=object)
                for layer in self.layers:
                    for name in names:
                        m = s.maps[layer][name].float().cpu().numpy()
                        if table == "k24_maps":
                            m = _row_normalise(m)  # exactly as the site's k24_maps
                        rows.append(pd.DataFrame({
                            "model": self.model, "example": self.example_name(k), "layer": layer, key: name,
                            "i": ii[valid], "j": jj[valid], "token_i": toks[ii[valid]], "token_j": toks[jj[valid]],
                            "value": m[valid].astype("float32")}))
        elif table == "k21_tokens":
            for k, s in enumerate(self.sequences):
                for layer in self.layers:
                    n = len(s)
                    rows.append(pd.DataFrame({
                        "model": self.model, "dataset": dataset, "seq": k, "layer": layer, "pos": range(n),
                        "token": s.tokens, "category": s.categories,
                        **{m: (100.0 * s.ratios[layer][m].float().cpu().numpy()).astype("float32")
                           for m in schema.K21_METHODS}}))
        else:
            worst: dict[tuple[int, str], float] = {}
            for s in self.sequences:
                for layer, per in s.errors.items():
                    for point, e in per.items():
                        worst[(layer, point)] = max(worst.get((layer, point), 0.0), e)
            order = {p: k for k, p in enumerate(self.layout.checks)}
            rows.append(pd.DataFrame(
                [dict(model=self.model, dataset=dataset, layer=l, scope=p, max_rel_error=e)
                 for (l, p), e in sorted(worst.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99)))],
                columns=cols))
        return pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)

    def plot(self, layer: int, scope: str, seq: int = 0, *, size: int = 320) -> "alt.Chart":
        """An Altair heatmap of one map (rows: output token ``i``, columns: source token ``j``).

        Args:
            layer: 0-based layer.
            scope: A decomposed scope (row-normalised, as on the site) or K21 method (raw values).
            seq: Which sequence.
            size: The panel's width and height in px.

        Returns:
            The chart (display it in a notebook, or ``.save("map.html")``).
        """
        self.map(layer, scope, seq)  # a clear KeyError for what was not computed
        table = "k24_maps" if scope in self.scopes else "k21_maps"
        df = self.to_frame(table)
        key = "scope" if table == "k24_maps" else "method"
        df = df[(df["example"] == self.example_name(seq)) & (df["layer"] == layer) & (df[key] == scope)]
        from report_builder.figures.charts.token_maps import token_map_heatmap  # render side, imported lazily

        return token_map_heatmap(df, panel=key, panel_order=[scope], slider=False, size=size)


def _valid_pairs(n: int, causal: bool):
    from report_builder.stats.maps import valid_pairs_mask

    return valid_pairs_mask(n, causal)


def _row_normalise(m):
    from report_builder.stats.maps import row_normalise

    return row_normalise(m)


def load_model(source: str, *, device: str = "cpu", dtype: str = "float32", name: str | None = None) -> "LoadedModel":
    """Load a model once to decompose many texts with it.

    Args:
        source: An embedded name (``minilm``, ``smollm2``), a local directory or a hub id.
        device: ``cpu`` or ``cuda``.
        dtype: ``float32``, ``bfloat16`` or ``float16``.
        name: Display name (default: ``source``).

    Returns:
        The loaded model (``.model`` the transformers base model, ``.tokenizer``, ``.facts()``).
    """
    from report_builder.models import loading

    return loading.load(source, name=name, device=device, dtype=dtype)


def _as_model(model: Any, device: str, dtype: str) -> "LoadedModel":
    from report_builder.models import loading

    if isinstance(model, loading.LoadedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(str(model), device=device, dtype=dtype)
    if isinstance(model, tuple) and len(model) == 2:
        hf, tok = model
        return loading.from_model(hf, tok, name=type(hf).__name__)
    raise TypeError("model: expected a source string (embedded name, local dir or hub id), a LoadedModel "
                    "from report_builder.load_model, or a (transformers model, tokenizer) pair")


def _pick(value: Any, known: Sequence[str], what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = list(known) if value == "all" else [value]
    bad = [v for v in value if v not in known]
    if bad:
        raise ValueError(f"{what}: unknown {', '.join(map(repr, bad))}; this model has {', '.join(known)}")
    return tuple(value)


def decompose(
    model: Any,
    texts: str | tuple[str, str] | Iterable[str | tuple[str, str]],
    *,
    layers: Iterable[int] | None = None,
    scopes: str | Iterable[str] | None = "all",
    methods: str | Iterable[str] | None = "all",
    device: str = "cpu",
    dtype: str = "float32",
    max_length: int | None = None,
    ig: str = "closed",
    ig_steps: int = 64,
    enforce: bool = True,
    batch_size: int = 8,
    max_memory: str = "1GiB",
) -> Decomposition:
    """Decompose every layer of a model, exactly, for a few texts.

    Each scope's output is written as ``z_i = sum_j z_{i<-j} + z_{i<-bias}`` (SPEC §1) and checked
    against the tensors the unmodified Hugging Face model computes.

    Args:
        model: An embedded name (``"minilm"``, ``"smollm2"``), a local directory, a hub id, a
            [`load_model`][report_builder.notebook.load_model] result, or a ``(transformers model, tokenizer)`` pair.
        texts: One text, a ``(text_a, text_b)`` pair, or a list of texts and pairs.
        layers: 0-based layers to decompose (default: all).
        scopes: K24 scopes whose maps to keep: ``"all"`` (the layout's scopes), a list, or ``None``.
            Scopes after the attention block need the feed-forward decomposition (the costly part).
        methods: K21 methods whose maps to keep (``"all"``, a list or ``None``); their ratios are
            always computed.
        device: ``cpu`` or ``cuda`` (for a source string).
        dtype: ``float32`` (errors enforced at 1e-4), ``bfloat16`` or ``float16`` (errors reported only).
        max_length: Truncate each text to this many tokens (default: the model's positions).
        ig: Feed-forward attribution: ``"closed"`` (exact closed-form IG) or ``"numerical"``.
        ig_steps: Steps of the numerical IG.
        enforce: Raise ``ReconstructionError`` when a float32 error exceeds the bound.
        batch_size: Sequences per forward pass.
        max_memory: Budget of the chunked FF step, e.g. ``"1GiB"``.

    Returns:
        A [`Decomposition`][report_builder.notebook.Decomposition] (tensors on the CPU).

    Raises:
        ValueError: Unknown scope, method or layer; an empty list of texts.
    """
    import torch

    from report_builder.config import parse_size
    from report_builder.data import EvalSet, TextItem, encode
    from report_builder.decompose.feedforward import IGOptions
    from report_builder.engine import Tokens, decompose_sequences

    if isinstance(texts, str) or (isinstance(texts, tuple) and len(texts) == 2
                                  and all(isinstance(t, str) for t in texts)):
        texts = [texts]
    items = []
    for k, t in enumerate(texts):
        a, b = (t, None) if isinstance(t, str) else tuple(t)
        items.append(TextItem(f"text-{k}", a, b))
    if not items:
        raise ValueError("texts: give at least one text")
    lm = _as_model(model, device, dtype)
    lay = lm.adapter.layout
    n_layers = lm.n_layers
    idxs = tuple(range(n_layers)) if layers is None else tuple(int(l) for l in layers)
    bad = [l for l in idxs if not 0 <= l < n_layers]
    if bad:
        raise ValueError(f"layers: {bad} out of range; {lm.name} has layers 0..{n_layers - 1}")
    sc = _pick(scopes, lay.scopes, "scopes")
    me = _pick(methods, schema.K21_METHODS, "methods")
    enc = encode(EvalSet("notebook", "notebook texts", tuple(items)), lm.tokenizer, causal=lm.causal,
                 max_length=max_length or lm.max_positions())
    seqs = [SequenceResult(text=e.text, tokens=list(e.tokens), categories=list(e.category)) for e in enc]
    with torch.no_grad():
        for k, layer, r in decompose_sequences(
                lm, [Tokens(e.input_ids, e.token_type_ids) for e in enc], layers=list(idxs), maps=sc + me,
                ratios=True, enforce=enforce, ig=IGOptions(method=ig, steps=ig_steps), batch_size=batch_size,
                budget_bytes=parse_size(max_memory)):
            s = seqs[k]
            s.maps[layer] = {name: r.maps[name].detach().float().cpu() for name in sc + me}
            s.ratios[layer] = {m: t.detach().float().cpu() for m, t in r.ratios.items()}
            s.bias[layer] = {p: t.detach().cpu() for p, t in r.bias.items()}
            s.errors[layer] = dict(r.errors)
    return Decomposition(model=lm.name, layout=lay, causal=lm.causal, layers=idxs, scopes=sc, methods=me,
                         sequences=seqs)


def load_results(path: str | os.PathLike = ".cache/report_builder") -> dict[str, pd.DataFrame]:
    """The results of a build as DataFrames, from its cache folder or from a built site.

    Args:
        path: A results cache (holding ``last_build.json``): gives the result tables of the last
            build, by table name (``k21_tokens``, ``k24_ctx``, … as in ARCHITECTURE.md). Or a built
            site folder: gives each figure's data (``figures/<id>/data.csv``), by figure id.

    Returns:
        Name -> DataFrame.

    Raises:
        FileNotFoundError: ``path`` is neither a cache with a recorded build nor a built site.
    """
    p = Path(path)
    if (p / "last_build.json").is_file():
        from report_builder import config as C
        from report_builder.last_build import tables_from_cache

        meta = json.loads((p / "last_build.json").read_text(encoding="utf-8"))
        cfg = C.replace(C.from_dict(meta["provenance"]["config"]), cache_dir=str(p))
        tables, _ = tables_from_cache(cfg)
        return tables
    figs = p / "figures"
    if figs.is_dir():
        out = {d.name: pd.read_csv(d / "data.csv") for d in sorted(figs.iterdir()) if (d / "data.csv").is_file()}
        if out:
            return out
    raise FileNotFoundError(f"{p} is neither a results cache with a recorded build (last_build.json) nor a "
                            f"built site (figures/<id>/data.csv); run `report-builder build` first")
