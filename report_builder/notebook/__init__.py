"""The notebook API: decompose a model's layers for your own texts and look at the results in Python.

```python
import report_builder as rb

res = rb.decompose("minilm", ["The cat sat on the mat.", ("A premise.", "A hypothesis.")])
res                                     # in Jupyter: an interactive map (layer slider, scope selector)
res.map(layer=3, scope="ATB")           # torch.Tensor (n, n), row-normalised; normalise=None: ||z_{i<-j}||
res[1].ratios[3]["ATTNRESLN-N"]         # torch.Tensor (n,): K21 context-mixing ratio in percent
res[0].bias[3]["ATB"]                   # the token-independent bias term of that scope
res.max_error                           # largest relative reconstruction error vs the HF forward
res.to_frame("k24_maps")                # tidy DataFrame with the result table's columns (joins data.csv)
res.plot(3, "ATB")                      # an Altair chart titled "..., layer 3"
res.show(layer=3, scope="ATB", normalise=None)   # the interactive view with explicit options

tables = rb.load_results()                          # the last build's result tables (default results cache)
rb.build("smoke", out_dir="my-site")                # the whole report: `api.build`, as `report-builder build`
```

**Conventions (SPEC §8), the same as the site's pages, charts and ``data.csv`` files.** Layers count
from 1 in everything you pass or read (``layers=[1]`` is the first layer; layer 0 is refused); a
frame from ``to_frame`` or ``load_results`` joins a figure's ``data.csv`` on ``layer`` without
arithmetic. Mixing ratios are in percent (0-100). Maps are row-normalised (each row sums to 1) unless
``normalise=None`` gives the raw norms ``||z_{i<-j}||``: the same default in ``map``, ``to_frame``,
``plot``, ``show`` and the inline view. A measured column names its unit, as ``data.csv`` does:
``ATTN-N (%)``, ``value (row-normalised)``, ``value (raw norm)`` (``frame.attrs["units"]`` says each in words).

``decompose`` works on any model the report supports: an embedded name (``minilm``, ``smollm2``), a
local directory, a hub id, a model already loaded with [`load_model`][report_builder.notebook.load_model], or a
``(transformers model, tokenizer)`` pair. Every result carries its reconstruction error, measured
against the unmodified Hugging Face forward pass. Pitfall: this package imports torch when
``decompose`` is called, never when ``report_builder`` is imported (see ``report_builder.__init__``),
and nothing here renders unless a result is shown or plotted (`notebook.view`).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import pandas as pd

from report_builder import schema
from report_builder.notebook.results import FRAME_TABLES, NOTEBOOK_DATASET, Decomposition, SequenceResult
from report_builder.notebook.units import NORMALISE

if TYPE_CHECKING:  # pragma: no cover - for the type checker and the API docs only
    from report_builder.models.loading import LoadedModel

__all__ = ["decompose", "load_model", "load_results", "Decomposition", "SequenceResult", "NORMALISE",
           "FRAME_TABLES", "NOTEBOOK_DATASET"]


def load_model(source: str, *, device: str = "cpu", dtype: str = "float32", name: str | None = None) -> "LoadedModel":
    """Load a model once to decompose many texts with it.

    Args:
        source: An embedded name (``minilm``, ``smollm2``), a local directory or a hub id.
        device: ``cpu`` or ``cuda``.
        dtype: The precision mode of the decomposition's pair GEMMs, as the config's ``dtype`` and
            ``--dtype``: ``float32`` (default), or on a GPU ``tf32``, ``bfloat16`` or ``float16``. The model
            itself is loaded in float32 whatever the mode (`decompose`'s ``dtype`` overrides it per call).
        name: Display name (default: ``source``).

    Returns:
        The loaded model (``.model`` the transformers base model, ``.tokenizer``, ``.facts()``).

    Raises:
        TypeError: ``source`` is not a string or path (a ``(model, tokenizer)`` pair goes to `decompose` itself).
        ValueError: An unknown mode, or a reduced one on a CPU.
    """
    from report_builder.models import loading
    from report_builder.models.quiet import library_bars

    if not isinstance(source, (str, os.PathLike)):
        pair = " (to decompose your own model, pass rb.decompose((model, tokenizer), texts) the pair itself)" \
            if isinstance(source, tuple) else ""
        raise TypeError(f"source: expected an embedded name, a local directory or a hub id, got "
                        f"{type(source).__name__}{pair}")
    mode = _precision(dtype, device)
    with library_bars(False):  # the notebook's own progress only; the user's setting as it was afterwards
        lm = loading.load(source, name=name, device=device, dtype="float32")
    lm.precision = mode
    return lm


def _precision(dtype: str, device: str) -> str:
    """A precision mode's id (`schema.PRECISIONS`), or the one-line ValueError a build gives for it."""
    if dtype not in schema.PRECISIONS:
        raise ValueError(f"dtype: {dtype!r} is not one of {', '.join(schema.PRECISIONS)} (the pair GEMMs' "
                         "precision mode; the model stays float32)")
    if dtype != "float32" and str(device).split(":")[0] == "cpu":
        raise ValueError(f"dtype: {dtype} is not faster than float32 on a CPU (no tensor cores there); use "
                         "float32, or a GPU")
    return dtype


def _as_model(model: Any, device: str, dtype: str | None) -> "LoadedModel":
    from report_builder.models import loading

    if isinstance(model, loading.LoadedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(str(model), device=device, dtype=dtype or "float32")
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


def _layer_indices(layers: Iterable[int] | None, lm: "LoadedModel") -> tuple[int, ...]:
    """The user's layers (from 1) checked against the model, sorted, without repeats."""
    import operator

    n = lm.n_layers
    if layers is None:
        return tuple(range(1, n + 1))
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable):
        hint = f"[{layers!r}]" if isinstance(layers, int) else "[1, 2]"
        raise ValueError(f"layers: expected a list of whole numbers counted from 1 (e.g. {hint}), got {layers!r}")
    layers = list(layers)
    try:
        wanted = sorted({operator.index(l) for l in layers})
    except TypeError:
        raise ValueError(f"layers: expected whole numbers counted from 1, got {layers!r}") from None
    bad = [l for l in wanted if not 1 <= l <= n]
    if bad:
        raise ValueError(f"layer {', '.join(map(str, bad))} does not exist: layers count from 1, and {lm.name} "
                         f"has layers 1..{n}")
    if not wanted:
        raise ValueError("layers: give at least one layer (counted from 1), or None for all")
    return tuple(wanted)


def _text_pairs(texts: Any) -> list[tuple[str, str | None]]:
    """``(text_a, text_b or None)`` per text, or one ValueError naming the argument that is neither a
    text, a pair nor a list of them."""
    if isinstance(texts, str) or (isinstance(texts, tuple) and len(texts) == 2
                                  and all(isinstance(t, str) for t in texts)):
        texts = [texts]
    if isinstance(texts, (bytes, dict)) or not isinstance(texts, Iterable):
        raise ValueError(f"texts: expected a text, a (text_a, text_b) pair or a list of them, got {texts!r:.80}")
    out = []
    for k, t in enumerate(texts):
        if isinstance(t, str):
            out.append((t, None))
        elif isinstance(t, (tuple, list)) and len(t) == 2 and all(isinstance(x, str) for x in t):
            out.append((t[0], t[1]))
        else:
            raise ValueError(f"texts[{k}]: expected a text or a (text_a, text_b) pair, got {t!r:.80}")
    return out


def _index(value: Any) -> int | None:
    """``value`` as a whole number (an int or anything with ``__index__``; not a float, not a string), or None."""
    import operator

    try:
        return operator.index(value)
    except TypeError:
        return None


def _whole(what: str, value: Any, low: int = 1) -> int:
    n = _index(value)
    if n is None or n < low:
        raise ValueError(f"{what}: expected a whole number ≥ {low}, got {value!r}")
    return n


def _max_length(max_length: Any, lm: "LoadedModel") -> int:
    """The tokens a text is cut to: ``max_length`` within the model's positions (default: all of them)."""
    limit = lm.max_positions()
    if max_length is None:
        return limit
    n = _index(max_length)
    if n is None or not 1 <= n <= limit:
        raise ValueError(f"max_length: expected a whole number from 1 to {lm.name}'s {limit} positions (or None "
                         f"for all of them), got {max_length!r}")
    return n


def _warn_cut(enc, tokenizer, limit: int) -> None:
    """One warning naming the texts the tokenizer cut to ``limit`` tokens."""
    cut = [k for k, e in enumerate(enc)  # verbose=False: no "longer than the maximum" warning for a text cut here
           if len(e) >= limit and len(tokenizer(e.text, verbose=False)["input_ids"]) > limit]
    if cut:
        warnings.warn(f"text{'s' * (len(cut) > 1)} {', '.join(map(str, cut))} cut to {limit} tokens "
                      f"(max_length, default the model's positions)", stacklevel=_caller_level())


def _caller_level() -> int:
    """`warnings.warn`'s ``stacklevel`` (called from the warning function) that names the first frame outside
    this package: the user's line, however many of the package's frames (`rb.decompose`) lie between."""
    import sys

    package = os.path.join(os.path.realpath(Path(__file__).parents[1]), "")
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.realpath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _available_memory() -> int | None:
    """Bytes of memory available to this process now (psutil), or None where it cannot tell."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with the compute extra
        return None
    return int(psutil.virtual_memory().available)


def _check_memory(lengths: list[int], maps: int, layers: int) -> None:
    """One MemoryError, before any work, when the maps a result keeps (``n²`` float32 numbers per text, map
    and layer; on the CPU whatever the device) cannot fit in the memory available: the kernel would die
    of it, unannounced, after the whole computation."""
    from report_builder.costs.text import fmt_bytes

    need, free = 4 * maps * layers * sum(n * n for n in lengths), _available_memory()
    if free is not None and need > free:
        raise MemoryError(f"the maps kept would take {fmt_bytes(need)} ({maps} maps x {layers} layers, texts up to "
                          f"{max(lengths)} tokens), more than the {fmt_bytes(free)} of memory available: pass "
                          "layers=[...], scopes=[...], methods=None or max_length= to keep less")


def decompose(
    model: Any,
    texts: str | tuple[str, str] | Iterable[str | tuple[str, str]],
    *,
    layers: Iterable[int] | None = None,
    scopes: str | Iterable[str] | None = "all",
    methods: str | Iterable[str] | None = "all",
    device: str = "cpu",
    dtype: str | None = None,
    max_length: int | None = None,
    ig: str = "closed",
    ig_steps: int = 64,
    enforce: bool = True,
    batch_size: int = 8,
    max_memory: str = "1GiB",
    progress: bool = True,
) -> Decomposition:
    """Decompose every layer of a model, exactly, for your texts.

    Each scope's output is written as ``z_i = sum_j z_{i<-j} + z_{i<-bias}`` (the report's Methods page) and checked
    against the tensors the unmodified Hugging Face model computes. Layers count from 1 (as on the
    site, in its ``data.csv`` and in the papers); mixing ratios are in percent; maps are shown
    row-normalised unless ``normalise=None`` (see [`Decomposition`][report_builder.notebook.Decomposition]).

    Args:
        model: An embedded name (``"minilm"``, ``"smollm2"``), a local directory, a hub id, a
            [`load_model`][report_builder.notebook.load_model] result, or a ``(transformers model, tokenizer)`` pair
            (run in eval mode; each of its modules gets its own train/eval mode back afterwards).
        texts: One text, a ``(text_a, text_b)`` pair, or a list of texts and pairs.
        layers: Layers to decompose, counted from 1 (``[1]`` is the first layer; default: all).
        scopes: K24 scopes whose maps to keep: ``"all"`` (the layout's scopes), a list, or ``None``.
            Scopes after the attention block need the feed-forward decomposition (the costly part).
        methods: K21 methods whose maps to keep (``"all"``, a list or ``None``); their ratios are
            always computed.
        device: ``cpu`` or ``cuda`` (for a source string).
        dtype: The pair GEMMs' precision mode, as the config's ``dtype`` and ``--dtype``: ``float32``
            (errors enforced at 1e-4), or on a GPU ``tf32``, ``bfloat16`` or ``float16`` (each enforced at
            its own bound, ``schema.PRECISIONS``); the model stays float32. Default: the loaded model's
            mode (`load_model`), else float32.
        max_length: Cut each text to this many tokens, 1 to the model's positions (default: all of
            them; a warning names the texts that were cut).
        ig: Feed-forward attribution: ``"closed"`` (exact closed-form IG) or ``"numerical"``.
        ig_steps: Steps of the numerical IG.
        enforce: Raise ``ReconstructionError`` when a float32 error exceeds the bound.
        batch_size: Sequences per forward pass.
        max_memory: Budget of the chunked FF step, e.g. ``"1GiB"``.
        progress: Show a progress bar over sequences x layers (``tqdm.auto``: a widget in Jupyter;
            it appears only when the work takes more than a moment). ``False`` turns it off.

    Returns:
        A [`Decomposition`][report_builder.notebook.Decomposition] (tensors on the CPU).

    Raises:
        ValueError: Unknown scope or method; a layer outside ``1..n_layers``; an empty list of texts, or
            an item neither a text nor a pair; ``max_length`` outside ``1..`` the model's positions; an
            unknown ``ig``, or ``ig_steps`` below 1; an unknown precision mode, or a reduced one on a CPU.
        MemoryError: The maps to keep would not fit in the memory available (said before any work).
    """
    # a (model, tokenizer) pair is the user's own model: it runs in eval mode here, and gets its modes back
    modes = [(m, m.training) for m in model[0].modules()] if _is_pair(model) else []
    try:
        return _decompose(model, texts, layers=layers, scopes=scopes, methods=methods, device=device, dtype=dtype,
                          max_length=max_length, ig=ig, ig_steps=ig_steps, enforce=enforce, batch_size=batch_size,
                          max_memory=max_memory, progress=progress)
    finally:
        for m, training in modes:
            m.training = training


def _is_pair(model: Any) -> bool:
    return isinstance(model, tuple) and len(model) == 2 and hasattr(model[0], "modules")


def _decompose(model: Any, texts: Any, *, layers, scopes, methods, device: str, dtype: str | None,
               max_length: int | None, ig: str, ig_steps: int, enforce: bool, batch_size: int, max_memory: str,
               progress: bool) -> Decomposition:
    """`decompose` (arguments as there)."""
    import torch

    with warnings.catch_warnings():  # tqdm.auto without ipywidgets warns, then draws a text bar: fine
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm

    from report_builder.config import parse_size
    from report_builder.data import EvalSet, TextItem, encode
    from report_builder.decompose.feedforward import IGOptions
    from report_builder.engine import Tokens, decompose_sequences

    items = [TextItem(f"text-{k}", a, b) for k, (a, b) in enumerate(_text_pairs(texts))]
    if not items:
        raise ValueError("texts: give at least one text")
    if ig == "numerical":
        _whole("ig_steps", ig_steps)
    if ig not in ("closed", "numerical"):
        raise ValueError(f"ig: {ig!r} is not one of closed, numerical")
    lm = _as_model(model, device, dtype)
    mode = _precision(dtype, lm.device.type) if dtype is not None else getattr(lm, "precision", "float32")
    lay = lm.adapter.layout
    wanted = _layer_indices(layers, lm)
    sc = _pick(scopes, lay.scopes, "scopes")
    me = _pick(methods, schema.K21_METHODS, "methods")
    limit = _max_length(max_length, lm)
    enc = encode(EvalSet("notebook", "notebook texts", tuple(items)), lm.tokenizer, causal=lm.causal,
                 max_length=limit)
    _warn_cut(enc, lm.tokenizer, limit)
    _check_memory([len(e) for e in enc], len(sc + me), len(wanted))
    seqs = [SequenceResult(text=e.text, tokens=list(e.tokens), categories=list(e.category)) for e in enc]
    engine_layers = [l - schema.FIRST_LAYER for l in wanted]  # 0-based inside the engine only
    bar = tqdm(total=len(enc) * len(wanted), desc=f"decomposing ({lm.name})", unit="layer", disable=not progress,
               delay=1.0)
    try:
        with torch.no_grad():
            for k, index, r in decompose_sequences(
                    lm, [Tokens(e.input_ids, e.token_type_ids) for e in enc], layers=engine_layers, maps=sc + me,
                    ratios=True, enforce=enforce, ig=IGOptions(method=ig, steps=ig_steps), batch_size=batch_size,
                    budget_bytes=parse_size(max_memory), precision=mode):
                s, layer = seqs[k], index + schema.FIRST_LAYER
                s.maps[layer] = {name: r.maps[name].detach().float().cpu() for name in sc + me}
                s.ratios[layer] = {m: 100.0 * t.detach().float().cpu() for m, t in r.ratios.items()}  # percent
                s.bias[layer] = {p: t.detach().cpu() for p, t in r.bias.items()}
                s.errors[layer] = dict(r.errors)
                bar.update(1)
    finally:
        bar.close()
    return Decomposition(model=lm.name, layout=lay, causal=lm.causal, layers=wanted, scopes=sc, methods=me,
                         sequences=seqs, n_layers=lm.n_layers)


def load_results(path: str | os.PathLike | None = None) -> dict[str, pd.DataFrame]:
    """The results of a build as DataFrames, from its cache folder or from a built site.

    Layers count from 1 in both, as on the site (the cache's parquet tables count from 0 and are
    shifted here, never rewritten); mixing ratios are in percent; a measured column carries its unit in
    its name, as in ``data.csv`` (``ATTN-N (%)``, ``value (row-normalised)``; the cache's tables keep the
    bare names), and ``frame.attrs["units"]`` gives each such column's unit in words (``schema.UNITS``).

    Args:
        path: A results cache (holding ``last_build.json``; default: the default results cache,
            ``<user cache>/results``, which builds use from any directory): gives the result tables of the last
            build, by table name (``k21_tokens``, ``k24_ctx``, … as in ARCHITECTURE.md). Or a built
            site folder: gives each figure's data (``figures/<id>/data.csv``), by figure id, with text
            cells as the tables hold them (the ``'`` that keeps a spreadsheet from reading ``=…`` as a
            formula is removed).

    Returns:
        Name -> DataFrame.

    Raises:
        NotBuilt: ``path`` is neither a cache with a recorded build nor a built site.
    """
    if path is None:
        from report_builder.caches import default_dir

        path = default_dir()
    p = Path(path)
    from report_builder import last_build

    if last_build.read(p) is not None:  # read bounded, no link followed (a copied cache is untrusted)
        from report_builder.notebook.frames import user_tables

        tables, _ = last_build.tables_from_cache(p)
        return user_tables(tables)  # layers from 1, units named: the one boundary (SPEC §8)
    figs = p / "figures"
    if figs.is_dir() and not figs.is_symlink():
        from report_builder.citations import readback  # the one reader of a site: bounded, no link followed

        out = {}
        for d in sorted(figs.iterdir()):
            fig_id = readback.figure_id(d.name)
            frame = readback.read_data(figs, f"{d.name}/data.csv") if fig_id else None
            if frame is not None:
                out[fig_id] = frame
        if out:
            return out
    from report_builder.errors import NotBuilt

    raise NotBuilt(f"{p} is neither a results cache with a recorded build (last_build.json) nor a "
                            f"built site (figures/<id>/data.csv); run `report-builder build` first")
