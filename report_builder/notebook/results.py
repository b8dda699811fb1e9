"""What `report_builder.decompose` returns: `Decomposition` and its `SequenceResult`s, as a user reads them.

Conventions (SPEC §8), the same as on the site and in its ``data.csv`` files: **layers count from 1**
(``res.map(layer=1, ...)`` is the first layer; the engine's 0-based indices never reach a user);
**mixing ratios are in percent** (0-100); a **map** is either the raw norm ``||z_{i<-j}||`` or
row-normalised (each row divided by its sum), chosen by ``normalise="row" | None`` with the same
default, `NORMALISE`, in `Decomposition.map`, ``to_frame``, ``plot``, ``show`` and the inline view.

Pitfall: ``SequenceResult.maps`` holds the raw norms (the stored data); the methods apply
``normalise``. Rendering (Altair, the vendored Vega) is imported only by ``plot``/``show``/the view.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from report_builder import schema
from report_builder.notebook.units import NORMALISE, map_unit

if TYPE_CHECKING:  # pragma: no cover - for the type checker and the API docs only
    import altair as alt
    import torch

    from report_builder.notebook.view import MapView

NOTEBOOK_DATASET = "notebook"
"""The ``dataset`` column of frames built from texts passed to [`decompose`][report_builder.notebook.decompose]."""

FRAME_TABLES = ("k24_maps", "k21_maps", "k21_tokens", "recon_errors")
"""Result tables [`to_frame`][report_builder.notebook.Decomposition.to_frame] can produce (columns as in ``schema.TABLES``)."""

def _row_normalise(m):
    from report_builder.stats.maps import row_normalise

    return row_normalise(m)


def _span(layers) -> str:
    ls = list(layers)
    if ls and ls == list(range(ls[0], ls[-1] + 1)) and len(ls) > 2:
        return f"{ls[0]}-{ls[-1]}"
    return ", ".join(map(str, ls))


class MissingLayer(KeyError, ValueError):
    """A layer that a result's per-layer dict does not hold (a `KeyError` as any dict's, and the
    `ValueError` the API gives for a layer elsewhere), saying that layers count from 1."""

    def __str__(self) -> str:
        return str(self.args[0])


class ByLayer(dict):
    """A dict keyed by layer (from 1) whose missing key names the rule instead of a bare ``KeyError: 0``;
    ``what`` is the attribute it is (``ratios``), for the message."""

    def __init__(self, data: Any = (), what: str = "this dict") -> None:
        super().__init__(data)
        self.what = what

    def __missing__(self, layer: Any) -> Any:
        raise MissingLayer(f"layer {layer!r} is not in {getattr(self, 'what', 'this dict')}: layers count from 1; "
                           f"this result has layers {_span(sorted(self)) or 'none'}")


@dataclass(repr=False)
class SequenceResult:
    """The decomposition of one text (or text pair). Layers are keys counted from 1.

    In Jupyter it renders itself as the interactive map view of its sequence (`Decomposition.show`).

    Attributes:
        text: The text the tokens come from (pairs: ``text_a + "\\n" + text_b`` for encoders).
        tokens: The tokenizer's token strings, length ``n``.
        categories: K21 token category per token (``Normal``, ``[CLS]``, ``[SEP]``, ``[MASK]``).
        maps: layer (from 1) -> scope or K21 method -> ``(n, n)`` float32 tensor of **raw norms**
            ``||z_{i<-j}||`` (row ``i`` the output token, column ``j`` the source token; the bias term
            is never in a map). [`Decomposition.map`][report_builder.notebook.Decomposition.map]
            row-normalises by default.
        ratios: layer (from 1) -> K21 method -> ``(n,)`` context-mixing ratio **in percent** (0-100).
        bias: layer (from 1) -> check point -> the bias term ``z_{i<-bias}``, ``(n, d)`` or ``(d,)``.
        errors: layer (from 1) -> check point -> ``max_i ||sum_j z_{i<-j} + z_{i<-bias} - z_i|| / ||z_i||``.
    """

    text: str
    tokens: list[str]
    categories: list[str]
    maps: dict[int, dict[str, "torch.Tensor"]] = field(default_factory=dict)
    ratios: dict[int, dict[str, "torch.Tensor"]] = field(default_factory=dict)
    bias: dict[int, dict[str, "torch.Tensor"]] = field(default_factory=dict)
    errors: dict[int, dict[str, float]] = field(default_factory=dict)
    _owner = None  # the Decomposition it belongs to, and its index there (set by it; not dataclass fields,
    _index = 0     # so `dataclasses.asdict` and `==` see only the data)

    def __post_init__(self) -> None:
        for what in ("maps", "ratios", "bias", "errors"):
            setattr(self, what, ByLayer(getattr(self, what), what))

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        words = " ".join(self.tokens[:6]) + (" …" if len(self.tokens) > 6 else "")
        err = max((e for per in self.errors.values() for e in per.values()), default=0.0)
        return (f"<SequenceResult: {len(self)} tokens ({words}), layers {_span(sorted(self.maps))}, "
                f"max error {err:.1e}>")

    def show(self, layer: int | None = None, scope: str | None = None, *,
             normalise: str | None = NORMALISE) -> "MapView":
        """This sequence's interactive map view (`Decomposition.show` with ``seq`` this sequence)."""
        if self._owner is None:
            raise ValueError("this SequenceResult is not part of a Decomposition; use Decomposition.show")
        return self._owner.show(layer, scope, seq=self._index, normalise=normalise)

    def _repr_html_(self) -> str | None:
        return None if self._owner is None else self.show()._repr_html_()


@dataclass(repr=False)
class Decomposition:
    """What [`decompose`][report_builder.notebook.decompose] returns: one [`SequenceResult`][report_builder.notebook.SequenceResult] per text, plus what was computed.

    Layers count from 1 everywhere (arguments, keys, frames, titles), as on the site and in its
    ``data.csv``: a frame from `to_frame` joins a figure's ``data.csv`` on its ``layer`` column as it is.
    Mixing ratios are in percent. Maps are row-normalised unless ``normalise=None`` (`NORMALISE`).
    In Jupyter the object renders itself as an interactive map (layer slider, scope and example
    selectors, offline); `show` takes explicit options.

    Attributes:
        model: The model's name.
        layout: The layer layout (``schema.POST_LN`` or ``schema.PRE_LN``): its scopes, checks, label.
        causal: Whether the model is decoder-only (its maps are lower-triangular).
        layers: The decomposed layers, counted from 1.
        scopes: The K24 scopes whose maps were computed.
        methods: The K21 methods whose maps were computed.
        sequences: One result per input text, in input order.
        n_layers: The model's number of layers (valid layers are ``1..n_layers``).
    """

    model: str
    layout: schema.Layout
    causal: bool
    layers: tuple[int, ...]
    scopes: tuple[str, ...]
    methods: tuple[str, ...]
    sequences: list[SequenceResult]
    n_layers: int = 0

    def __post_init__(self) -> None:
        self.n_layers = self.n_layers or max(self.layers, default=0)
        for k, s in enumerate(self.sequences):
            s._owner, s._index = self, k

    def __len__(self) -> int:
        return len(self.sequences)

    def __getitem__(self, seq: int) -> SequenceResult:
        return self.sequences[seq]

    def __iter__(self):
        return iter(self.sequences)

    def __repr__(self) -> str:
        n = len(self)
        return (f"<Decomposition: {self.model} ({self.layout.label}), {n} sequence{'s' * (n != 1)}, "
                f"layers {_span(self.layers)} of {self.n_layers}, {len(self.scopes)} scopes, "
                f"{len(self.methods)} methods, max error {self.max_error:.1e}>")

    @property
    def max_error(self) -> float:
        """The largest relative reconstruction error over every sequence, layer and check point."""
        return max((e for s in self.sequences for per in s.errors.values() for e in per.values()), default=0.0)

    # ------------------------------------------------------------------ arguments a user passes

    def _layer(self, layer: Any) -> int:
        """A user's layer number (from 1), checked against the model and what was decomposed."""
        try:
            n = operator.index(layer)
        except TypeError:
            raise TypeError(f"layer: expected an int counted from 1, got {layer!r}") from None
        if not 1 <= n <= self.n_layers:
            raise ValueError(f"layer {n} does not exist: layers count from 1, and {self.model} has layers "
                             f"1..{self.n_layers}")
        if n not in self.layers:
            raise ValueError(f"layer {n} was not decomposed; decomposed layers: {_span(self.layers)} "
                             f"(decompose(..., layers=[{n}]))")
        return n

    def _name(self, scope: str) -> str:
        if scope not in self.scopes and scope not in self.methods:
            raise ValueError(f"no map {scope!r}; computed: {', '.join(self.scopes + self.methods) or 'none'}")
        return scope

    def _seq(self, seq: Any) -> int:
        n = operator.index(seq)
        if not -len(self) <= n < len(self):
            raise IndexError(f"seq {n}: there are {len(self)} sequences (seq counts from 0, as a Python list)")
        return n % len(self)

    # ------------------------------------------------------------------ numbers

    def map(self, layer: int, scope: str, seq: int = 0, *, normalise: str | None = NORMALISE) -> "torch.Tensor":
        """The ``(n, n)`` map of one scope (or K21 method) at one layer for one sequence.

        Args:
            layer: The layer, counted from 1 (``1..n_layers``).
            scope: A scope or K21 method that was decomposed.
            seq: Which sequence (0-based, as a Python list).
            normalise: ``"row"`` (default): each row divided by its sum (rows sum to 1; the bias
                term is excluded); ``None``: the raw norms ``||z_{i<-j}||``.

        Returns:
            A float32 tensor, row ``i`` the output token, column ``j`` the source token.

        Raises:
            ValueError: A layer outside ``1..n_layers`` or not decomposed, or a scope not computed
                (the message lists what was).
        """
        import torch

        unit = map_unit(normalise)
        m = self.sequences[self._seq(seq)].maps[self._layer(layer)][self._name(scope)]
        if unit == schema.ROW_NORMALISED:
            m = torch.from_numpy(_row_normalise(m.numpy()).astype("float32"))
        return m

    def example_name(self, seq: int) -> str:
        """The ``example`` label of one sequence in the frames and charts: ``"<k+1>: <first six words>…"``
        (the site's K24 example labels, so frames join its ``data.csv``)."""
        return schema.example_label(seq + 1, self.sequences[seq].text)

    def to_frame(self, table: str = "k24_maps", *, normalise: str | None = NORMALISE,
                 dataset: str = NOTEBOOK_DATASET) -> pd.DataFrame:
        """The results as a tidy DataFrame with the columns of one result table (ARCHITECTURE.md).

        The ``layer`` column counts from 1, the ``example`` labels are the site's and a measured column
        carries its unit in its name as in ``data.csv`` (``value (row-normalised)``, ``value (raw norm)``,
        ``ATTN-N (%)``), so the frame joins a figure's ``data.csv`` as it is; ``frame.attrs["units"]``
        gives each such column's unit in words.

        Args:
            table: ``"k24_maps"`` (scope maps, valid pairs only: ``j <= i`` for causal models),
                ``"k21_maps"`` (the K21 methods' maps, all pairs), ``"k21_tokens"`` (per-token mixing
                ratios in percent), or ``"recon_errors"``.
            normalise: For the maps' ``value``: ``"row"`` (default; the site's K24 maps) or ``None``
                (raw norms ``||z_{i<-j}||``; the site's K21 maps). Other tables ignore it.
            dataset: The ``dataset`` column where the table has one.

        Returns:
            One row per observation, columns in ``schema.TABLES[table]`` order (measured ones named with
            their unit).

        Raises:
            ValueError: An unknown table, one whose maps were not computed, or a bad ``normalise``.
        """
        from report_builder.notebook.frames import frame

        if table not in FRAME_TABLES:
            raise ValueError(f"unknown table {table!r}; choose one of {', '.join(FRAME_TABLES)}")
        return frame(self, table, map_unit(normalise), dataset)

    # ------------------------------------------------------------------ pictures

    def plot(self, layer: int, scope: str, seq: int = 0, *, normalise: str | None = NORMALISE,
             size: int = 320) -> "alt.Chart":
        """An Altair heatmap of one map (rows: output token ``i``, columns: source token ``j``), titled
        ``"<model>, <scope> (row-normalised | raw norm ||z_i←j||), layer <layer>"``.

        Args:
            layer: The layer, counted from 1.
            scope: A decomposed scope or K21 method.
            seq: Which sequence (0-based).
            normalise: ``"row"`` (default) or ``None`` (raw norms), as in `map`.
            size: The panel's width and height in px.

        Returns:
            The chart (display it in a notebook, or ``.save("map.html")``). A map of over 400,000 cells keeps
            its first tokens, as the interactive view does, and its title says how many of how many.
        """
        from report_builder.notebook.view import plot_map

        return plot_map(self, self._layer(layer), self._name(scope), self._seq(seq), map_unit(normalise), size)

    def show(self, layer: int | None = None, scope: str | None = None, seq: int | None = None, *,
             normalise: str | None = NORMALISE) -> "MapView":
        """The interactive map view (what Jupyter shows for the object), with explicit options.

        A layer slider, a scope/method selector and an example selector; offline (the vendored Vega
        is inlined), token labels decoded, the site's colours. The result renders as the last
        expression of a cell (``display(res.show(...))`` elsewhere); ``.save("map.html")`` writes a
        standalone page.

        Args:
            layer: The layer shown first, counted from 1 (default: the middle decomposed layer).
            scope: The scope or method shown first (default: the layout's whole layer, else the first).
            seq: The sequence shown first (0-based; default 0).
            normalise: ``"row"`` (default) or ``None`` (raw norms), as in `map`.
        """
        from report_builder.notebook.view import map_view

        unit = map_unit(normalise)
        start_layer = self._layer(layer) if layer is not None else self.layers[(len(self.layers) - 1) // 2]
        names = self.scopes + self.methods
        if not names:
            raise ValueError("no maps were decomposed; call decompose(..., scopes='all')")
        whole = self.layout.whole_layer
        start_scope = self._name(scope) if scope is not None else (whole if whole in names else names[0])
        return map_view(self, start_layer, start_scope, self._seq(seq or 0), unit)

    def _repr_html_(self) -> str | None:
        if not (self.scopes or self.methods) or not self.layers:
            return None
        return self.show()._repr_html_()
