"""The result-table columns of ARCHITECTURE.md, shared by the tests that check schemas."""

MODELS = ["model", "source", "family", "class_name", "ln_position", "norm", "activation", "gated", "d_model",
          "layers", "heads", "kv_heads", "ff_size", "params", "fingerprint", "dtype", "device"]
RECON_ERRORS = ["model", "dataset", "layer", "scope", "max_rel_error"]
K24 = {
    "k24_ctx": ["model", "dataset", "layer", "kind", "component", "from_scope", "to_scope", "change",
                "change_sd", "n_seqs"],
    "k24_ffamp_pairs": ["model", "dataset", "layer", "rank", "seq", "i", "j", "token_i", "token_j", "amp",
                        "before", "after", "category", "context"],
    "k24_ffamp_base": ["model", "dataset", "layer", "category", "top_count", "top_share", "base_count",
                       "base_share"],
    "k24_res_norms": ["model", "dataset", "layer", "ff_norm_mean", "res_norm_mean", "ratio_mean", "ratio_q10",
                      "ratio_q50", "ratio_q90"],
    "k24_ln_dims": ["model", "dataset", "layer", "dim", "ff_change", "ln_weight", "ln_out_change", "kept_ratio"],
    "k24_maps": ["model", "example", "layer", "scope", "i", "j", "token_i", "token_j", "value"],
}
METHODS = ["ATTN-W", "ATTN-N", "ATTNRES-W", "ATTNRES-N", "ATTNRESLN-N"]
DATASETS = ["dataset", "model", "name", "n_samples", "mean_tokens", "domain", "source", "licence", "hash", "built"]
K21 = {
    "k21_tokens": ["model", "dataset", "seq", "layer", "pos", "token", "category", *METHODS],
    "k21_freq": ["model", "dataset", "seq", "pos", "token", "category", "freq_rank", *METHODS],
    "k21_expansion": ["model", "layer", "expansion_rate"],
    "k21_maps": ["model", "example", "layer", "method", "i", "j", "token_i", "token_j", "value"],
    "recon_errors": RECON_ERRORS,
}
