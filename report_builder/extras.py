"""Which optional extra installs which module, and the one `MissingDependency` message that says so.

The package is not on the package index: it installs from a clone (``pip install -e '.[compute]'``)
or from a built wheel (``pip install 'report_builder-<version>-py3-none-any.whl[compute]'``). The base
install is what ``render`` from a cache needs without the site tools; the extras add the rest:
``compute`` (torch, the models, the offline evaluation sets), ``render`` (Altair, Jinja, MkDocs),
``hub`` (the ``datasets`` library), ``distributed`` (Ray). `EXTRA_OF` maps each module a command may
import to its extra (`tests/test_packaging.py` checks it against pyproject.toml).

Every missing optional module reaches the user the same way: `require` before work that needs it, and
the CLI turns any other ``ModuleNotFoundError`` of a module listed here into the same line
(`from_import_error`); an ``ImportError`` of anything else stays an internal error (a real bug).
"""
from __future__ import annotations

import importlib.util
import sys

from report_builder import __version__
from report_builder.errors import MissingDependency

EXTRA_OF: dict[str, str] = {
    # import name -> extra (pyproject.toml [project.optional-dependencies]); "" = a base dependency
    **dict.fromkeys(("numpy", "pandas", "pyarrow", "yaml", "filelock"), ""),
    **dict.fromkeys(("torch", "transformers", "accelerate", "gguf", "safetensors", "huggingface_hub", "tqdm",
                     "wordfreq", "psutil", "gensim"), "compute"),
    **dict.fromkeys(("altair", "vl_convert", "jinja2", "markupsafe", "mkdocs", "material", "pymdownx",
                     "latex2mathml", "mkdocstrings", "mkdocstrings_handlers"), "render"),
    "datasets": "hub",
    "ray": "distributed",
}
"""Import name -> the extra that installs it (``""``: a base dependency)."""

DISTRIBUTION = {"yaml": "pyyaml", "vl_convert": "vl-convert-python", "material": "mkdocs-material",
                "pymdownx": "pymdown-extensions", "huggingface_hub": "huggingface-hub",
                "mkdocstrings_handlers": "mkdocstrings-python"}
"""Import names whose distribution is named differently."""


def install_line(extra: str) -> str:
    """How to install ``extra`` (the package is not on the package index: a clone or a wheel)."""
    spec = f"[{extra}]" if extra else ""
    return (f"pip install -e '.{spec}' in a clone of report_builder, or "
            f"pip install 'report_builder-{__version__}-py3-none-any.whl{spec}'")


def message(module: str, purpose: str | None = None) -> str:
    """The one line naming a missing module, the extra that installs it and how."""
    top = module.split(".")[0]
    extra = EXTRA_OF.get(top)
    dist = DISTRIBUTION.get(top, top)
    need = f"{purpose} needs {dist}" if purpose else f"{dist} is needed"
    if extra is None:
        return f"{need}, which is not installed: pip install {dist}"
    what = f"the [{extra}] extra" if extra else "a base dependency of report_builder"
    return f"{need} ({what}), which is not installed: {install_line(extra)}"


def available(module: str) -> bool:
    """Whether ``module`` is imported already or can be (imports nothing)."""
    if sys.modules.get(module) is not None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(*modules: str, purpose: str | None = None) -> None:
    """Raise `MissingDependency` naming the extra of the first of ``modules`` that is not installed."""
    for m in modules:
        if not available(m):
            raise MissingDependency(message(m, purpose))


def from_import_error(e: BaseException, purpose: str | None = None) -> MissingDependency | None:
    """The `MissingDependency` for a ``ModuleNotFoundError`` of an optional module, else None (a real
    import bug stays an internal error)."""
    if not isinstance(e, ModuleNotFoundError) or not e.name:
        return None
    if e.name.split(".")[0] not in EXTRA_OF:
        return None
    return MissingDependency(message(e.name, purpose))
