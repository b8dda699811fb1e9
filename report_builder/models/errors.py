"""Errors a user can act on. Each message says what went wrong and what to do."""


class ReportBuilderError(Exception):
    """Base class: the CLI prints these as one clear message and exits non-zero."""


class UnknownModel(ReportBuilderError):
    """The model name is neither an embedded default, a local directory, nor a hub id that exists."""


class HubUnreachable(ReportBuilderError):
    """The model hub cannot be reached (offline mode, or no network)."""


class UnsupportedArchitecture(ReportBuilderError):
    """No adapter is registered for the model's class."""


class FusedAttention(ReportBuilderError):
    """Attention probabilities or value vectors were not captured (fused/SDPA attention skips them)."""


class SequenceTooLong(ReportBuilderError):
    """A sequence is longer than the model's position embeddings."""


class ReconstructionError(ReportBuilderError):
    """A decomposition's terms do not sum to the model's own tensor within the bound."""
