"""The one exception the data layer raises.

Every failure a user can fix (a missing file, an unknown dataset id, an empty set, a tokenizer
without a mask token) is a :class:`DataError` whose message says what was expected and how to fix
it. Pitfall: do not let ``FileNotFoundError``/``KeyError`` escape from loaders; wrap them here.
"""

from __future__ import annotations


class DataError(ValueError):
    """An evaluation set could not be built, loaded or encoded; the message says how to fix it."""
