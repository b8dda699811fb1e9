"""Every error a user can act on, under one root: the CLI prints a `ReportBuilderError` as one line.

Each message says what went wrong and what to do. Expected failures (bad config, missing data, an
unsupported model, a decomposition that misses the error bound) raise one of these, never a bare
``ValueError``/``KeyError``. Pitfall: `ConfigError` and `DataError` also subclass ``ValueError`` (they
did before the tree existed); catch them by their own class, not by ``ValueError``.
"""
from __future__ import annotations


class ReportBuilderError(Exception):
    """Root: the CLI prints these as one clear message and exits non-zero (a traceback only with --debug)."""


class UsageError(ReportBuilderError, ValueError):
    """The command line asks for something impossible (e.g. `serve` on a port in use)."""


class ConfigError(ReportBuilderError, ValueError):
    """A configuration problem; the message names the offending key."""


class DataError(ReportBuilderError, ValueError):
    """An evaluation set could not be built, loaded or encoded; the message says how to fix it.

    Loaders wrap ``FileNotFoundError``/``KeyError`` into this; never let them escape.
    """


class ModelError(ReportBuilderError):
    """A model cannot be loaded or decomposed as configured."""


class UnknownModel(ModelError):
    """The model name is neither an embedded default, a local directory, nor a hub id that exists."""


class HubUnreachable(ModelError):
    """The model hub cannot be reached (offline mode, or no network)."""


class UnsupportedArchitecture(ModelError):
    """No adapter is registered for the model's class."""


class FusedAttention(ModelError):
    """Attention probabilities or value vectors were not captured (fused/SDPA attention skips them)."""


class SequenceTooLong(ModelError):
    """A sequence is longer than the model's position embeddings."""


class UnsafeOutput(ReportBuilderError):
    """An output or cache directory cannot be used without deleting or overwriting files the tool did
    not create, or cannot be written (see `report_builder.guard`)."""


class MissingDependency(ReportBuilderError):
    """An optional extra the command asks for is not installed; the message names the `pip install` line."""


class DistributedError(ReportBuilderError):
    """A distributed build failed beyond its retries (a worker kept dying, a node was lost) or its workers
    cannot reach the driver's cache; finished cache entries are kept, a rerun resumes."""


class ReconstructionError(ReportBuilderError):
    """A decomposition's terms do not sum to the model's own tensor within `schema.ERROR_BOUND`."""


__all__ = ["ReportBuilderError", "ConfigError", "DataError", "ModelError", "UnknownModel", "HubUnreachable",
           "UnsupportedArchitecture", "FusedAttention", "SequenceTooLong", "ReconstructionError", "UnsafeOutput", "UsageError", "MissingDependency",
           "DistributedError", "EXIT_CODES",
           "exit_code"]


EXIT_CODES = {"usage": 2, "config": 3, "model": 4, "reconstruction": 5, "interrupted": 130, "terminated": 143}
"""Documented exit codes of the CLI (README "Exit codes"); 1 is an unexpected internal error."""


def exit_code(e: BaseException) -> int:
    """The CLI exit code of an expected failure: 2 usage, 3 configuration/data/output (including an
    unwritable directory or a full disk), 4 model, 5 reconstruction bound missed."""
    if isinstance(e, ReconstructionError):
        return EXIT_CODES["reconstruction"]
    if isinstance(e, ModelError):
        return EXIT_CODES["model"]
    if isinstance(e, UsageError):
        return EXIT_CODES["usage"]
    return EXIT_CODES["config"]
