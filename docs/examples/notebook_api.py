# %% [markdown]
# # report_builder from Python (a notebook as a script)
#
# Runs offline on the embedded MiniLM (`python docs/examples/notebook_api.py [OUT_DIR]`); every cell works
# the same in Jupyter, where a result also draws itself as an interactive map. The tests run this file.
#
# Conventions, as on the site and in every `data.csv`: layers count from 1; mixing ratios are in
# percent; maps are row-normalised (each row sums to 1) unless `normalise=None` gives the raw norms;
# a measured column names its unit: `ATTN-N (%)`, `value (row-normalised)`, `value (raw norm)`.

# %%
import sys
import tempfile
from pathlib import Path

import pandas as pd

import report_builder as rb

out = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="rb-notebook-"))
out.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## Decompose a few texts
# Every scope's output is an exact sum of one term per source token plus a bias term; a map holds
# `||z_{i<-j}||`. The reconstruction error is measured against the Hugging Face forward pass.

# %%
model = rb.load_model("minilm", name="MiniLM-L6")  # load once, decompose many texts
pair = ("The man went to the store.", "He bought a gallon of milk.")  # the site's K21/K24 example
res = rb.decompose(model, [pair, "The cat sat on the mat."], layers=[1, 6])  # layers count from 1
print(res)  # one line; in Jupyter the object itself shows the interactive map
print(res[1])
assert res.max_error <= 1e-4

whole = res.layout.whole_layer  # "ATBFFRESLN" for a post-LN model
m = res.map(6, whole)  # torch.Tensor (n, n), row i = output token, column j = source token; rows sum to 1
raw = res.map(6, whole, normalise=None)  # the raw norms ||z_{i<-j}||
print("tokens:", res[0].tokens)
print(f"{whole} map of layer 6: shape {tuple(m.shape)}, largest source of token 1: "
      f"{res[0].tokens[int(m[1].argmax())]!r} ({100 * float(m[1].max()):.1f}% of its row)")
print("ATTNRESLN-N mixing ratio (%) of token 1, layer 6:", round(float(res[0].ratios[6]["ATTNRESLN-N"][1]), 2))
print("bias term of the attention block at layer 6:", tuple(res[0].bias[6]["ATB"].shape))

# %% [markdown]
# ## Tidy tables
# `to_frame` gives the columns of the report's result tables (ARCHITECTURE.md); a measured column carries
# its unit in its name, as in `data.csv`, and `attrs["units"]` says it in words.

# %%
ratios = res.to_frame("k21_tokens")
print(ratios.groupby("layer")[["ATTN-N (%)", "ATTNRESLN-N (%)"]].mean().round(2))
maps = res.to_frame("k24_maps")
print(maps.head(), "\nvalue:", maps.attrs["units"]["value (row-normalised)"])
print(res.to_frame("recon_errors").max_rel_error.max())

# %% [markdown]
# ## Pictures
# `plot` gives an Altair chart of one map; `show` (or the object itself, in Jupyter) the interactive view:
# a layer slider and scope/example selectors, offline (Vega is inlined), saved here as a page.

# %%
chart = res.plot(6, "ATB")  # titled "MiniLM-L6, ATB (row-normalised), layer 6"
chart.save(str(out / "atb-layer6.html"))
view = res.show(layer=6, scope="ATTN-N", normalise=None)
view.save(out / "view.html")
print("chart:", out / "atb-layer6.html", "| view:", view)

# %% [markdown]
# ## A whole (tiny) report, then its result tables

# %%
config = {
    "models": [{"name": "MiniLM-L6", "source": "minilm", "role": "primary_encoder"}],
    "datasets": [{"id": "wiki", "n": 2, "k24_n": 1, "max_length": 32}],
    "k24": {"top_k": 3, "examples": 1},
}
analysis, site = rb.build(config, cache_dir=str(out / "cache"), out_dir=str(out / "site"), log=None,
                          site_url="https://example.org/my-report/")
print(f"site: {site.site_dir} ({len(site.figures_built)} figures)")
tables = rb.load_results(out / "cache")  # layers from 1, as the site
print(sorted(tables))
print(tables["k21_tokens"].groupby("layer")["ATTNRESLN-N (%)"].mean().round(2))

# %% [markdown]
# ## Frames join the site's data without arithmetic
# The K24 scope-map explorer's `data.csv` and the notebook's frame of the same pair share model,
# example, layer, scope, i and j, and name the map value alike: `value (row-normalised)`; so do the
# cache's tables.

# %%
csv = pd.read_csv(site.site_dir / "figures" / "k24-maps" / "data.csv")
keys = ["model", "example", "layer", "scope", "i", "j"]
value = "value (row-normalised)"
assert value in csv.columns and value in maps.columns and value in tables["k24_maps"].columns
joined = maps.merge(csv, on=keys, suffixes=("_notebook", "_site"))
gap = (joined[f"{value}_notebook"] - joined[f"{value}_site"]).abs().max()
print(f"{len(joined)} map cells joined; largest difference {gap:.1e}")
assert len(joined) == len(maps[maps.example == res.example_name(0)])
assert gap < 1e-5
cached = tables["k24_maps"].merge(csv, on=keys, suffixes=("_cache", "_site"))
assert len(cached) == len(csv) and (cached[f"{value}_cache"] - cached[f"{value}_site"]).abs().max() < 1e-6
