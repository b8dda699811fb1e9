# %% [markdown]
# # report_builder from Python (a notebook as a script)
#
# Runs offline on the embedded MiniLM (`python docs/examples/notebook_api.py [OUT_DIR]`); every cell works
# the same in Jupyter. The tests run this file.

# %%
import sys
import tempfile
from pathlib import Path

import report_builder as rb

out = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="rb-notebook-"))
out.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## Decompose a few texts
# Every scope's output is an exact sum of one term per source token plus a bias term; each map is
# `||z_{i<-j}||`. The reconstruction error is measured against the Hugging Face forward pass.

# %%
model = rb.load_model("minilm")  # load once, decompose many texts
res = rb.decompose(model, ["The man went to the store.", ("The cat sat.", "It was tired.")], layers=[0, 5])
print(res)
assert res.max_error <= 1e-4

whole = res.layout.whole_layer  # "ATBFFRESLN" for a post-LN model
m = res.map(5, whole)  # torch.Tensor (n, n), row i = output token, column j = source token
print("tokens:", res[0].tokens)
print(f"{whole} map of layer 5: shape {tuple(m.shape)}, largest source of token 1: "
      f"{res[0].tokens[int(m[1].argmax())]!r}")
print("bias term of the attention block at layer 5:", tuple(res[0].bias[5]["ATB"].shape))

# %% [markdown]
# ## Tidy tables
# `to_frame` gives the columns of the report's result tables (ARCHITECTURE.md).

# %%
ratios = res.to_frame("k21_tokens")
print(ratios.groupby("layer")[["ATTN-N", "ATTNRESLN-N"]].mean().round(2))
maps = res.to_frame("k24_maps")
print(maps.head())
print(res.to_frame("recon_errors").max_rel_error.max())

# %% [markdown]
# ## A chart

# %%
chart = res.plot(5, "ATB")
chart.save(str(out / "atb-layer5.html"))
print("chart:", out / "atb-layer5.html")

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
tables = rb.load_results(out / "cache")
print(sorted(tables))
print(tables["k21_tokens"].groupby("layer")["ATTNRESLN-N"].mean().round(2))
