"""`stats.ranks`: Spearman's ρ equal to scipy's and pandas' in every bit (render needs no scipy, and a no-op
rebuild keeps every figure hash), on samples with and without ties, constant and short samples."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from report_builder.stats.ranks import series_spearman, spearman


def _samples():
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 17, 100, 1000, 5000):
        yield rng.normal(size=n), rng.normal(size=n)                       # no ties
        yield rng.integers(0, 4, n).astype(float), rng.normal(size=n)      # many ties in x
        yield rng.integers(0, 3, n).astype(float), rng.integers(0, 5, n).astype(float)
        yield rng.normal(size=n) * 1e-300, rng.exponential(size=n) * 1e300  # extreme magnitudes
        x = rng.normal(size=n)
        yield x, -x + rng.normal(size=n) * 1e-12                           # nearly perfect
        yield np.arange(n, dtype=float), np.arange(n, dtype=float)[::-1]    # exactly -1


@pytest.mark.parametrize("k", range(42))
def test_spearman_is_scipys_bit_for_bit(k):
    x, y = list(_samples())[k]
    with np.errstate(all="ignore"):
        want = spearmanr(x, y).statistic
    got = spearman(x, y)
    assert (np.isnan(got) and np.isnan(want)) or np.float64(got).tobytes() == np.float64(want).tobytes(), (got, want)


def test_undefined_cases_are_nan_like_scipy():
    import warnings

    for x, y in (([1.0], [2.0]), ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, np.nan], [3.0, 1.0, 2.0])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert np.isnan(spearmanr(x, y).statistic) and np.isnan(spearman(x, y))
    assert spearman([1.0, 2.0, 3.0], [3.0, 1.0, 2.0]) == spearmanr([1.0, 2.0, 3.0], [3.0, 1.0, 2.0]).statistic == -0.5


def test_series_spearman_is_pandas_corr_bit_for_bit():
    rng = np.random.default_rng(1)
    for n in (3, 50, 768):
        a = pd.Series(rng.normal(size=n), index=rng.permutation(n))
        b = pd.Series(rng.integers(0, 7, n).astype(float))
        a.iloc[::11] = np.nan
        want = a.corr(b, method="spearman")
        assert np.float64(series_spearman(a, b)).tobytes() == np.float64(want).tobytes()
