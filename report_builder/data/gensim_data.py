"""Locate the text files shipped in the ``gensim`` wheel's test data, without importing gensim.

Pitfall: ``gensim.test.utils.datapath`` imports the whole of gensim (slow); this finds the folder
through the import system instead; without gensim, a `MissingDependency` names the [compute] extra.
"""

from __future__ import annotations

import importlib.util
import os

from report_builder.errors import DataError, MissingDependency

WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
SENTIMENT_FILE = "pang_lee_polarity.cor"
NEWS_FILE = "lee_background.cor"


def gensim_test_file(name: str) -> str:
    """Absolute path of a file in ``gensim/test/test_data``.

    Args:
        name: File name inside the test-data folder.

    Returns:
        The path.

    Raises:
        MissingDependency: gensim (the [compute] extra) is not installed. DataError: the file is missing.
    """
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        from report_builder.extras import message

        raise MissingDependency(message("gensim", "the offline evaluation sets (their texts are gensim's test data)"))
    path = os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data", name)
    if not os.path.isfile(path):
        raise DataError(f"gensim test-data file not found: {path} (reinstall gensim>=4.3)")
    return path
