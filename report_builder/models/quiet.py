"""transformers' own output around our imports and model loads: tqdm's widget warning and its progress bars.

A notebook user sees only the package's own progress and log: transformers' first import imports
``tqdm.auto``, which in a Jupyter kernel without ipywidgets warns "IProgress not found. Please update
jupyter and ipywidgets" into the cell (then draws text bars), and its "Loading weights" bar follows
transformers' global setting, not a build's ``progress``. Pitfall: both are the user's settings too, so each
is changed only for the block and left as it was (`warnings.catch_warnings`, transformers' switch restored).
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Iterator

TQDM_NO_WIDGETS = "IProgress not found"
"""The start of the warning tqdm.auto gives on its first import in a Jupyter kernel without ipywidgets."""


@contextmanager
def no_widget_warning() -> Iterator[None]:
    """The block without tqdm.auto's `TQDM_NO_WIDGETS` warning (the warning filters as they were afterwards)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TQDM_NO_WIDGETS)
        yield


@contextmanager
def library_bars(enabled: bool) -> Iterator[None]:
    """transformers' own progress bars ("Loading weights") off for the block unless ``enabled`` (then as they
    are), as they were afterwards. Imports transformers without the widget warning."""
    with no_widget_warning():
        from transformers.utils import logging as tl

    was = tl.is_progress_bar_enabled()
    if not enabled:
        tl.disable_progress_bar()
    try:
        yield
    finally:
        if was and not enabled:
            tl.enable_progress_bar()
