"""Configuration of the syntax-aware Marian models (`model_type = "syntax_mt"`)."""

from __future__ import annotations

import ast
import contextvars
import dataclasses
import difflib
import functools
import inspect
import logging
import textwrap

from huggingface_hub.dataclasses import strict
from transformers import GenerationConfig, MarianConfig, PreTrainedConfig

from .errors import UserError, UserTypeError
from .methods.base import check_options
from .methods.builtin import BUILTIN  # noqa: F401  (registers the built-in methods)
from .methods.records import SITES
from .methods.registry import head_kinds, head_layout, parse_columns, registered
from .validation import check_choice, check_decoder_layer, check_finite, check_int, check_probability, check_weight

logger = logging.getLogger(__name__)

ATTENTION_INITS = ("normal", "xavier")
ATTENTION_KERNELS = ("auto", "eager", "fused")  # syntax_attention_kernel


_POSITIVE_INTS = (
    "vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads",
    "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings",
)  # fmt: skip
_PROBABILITIES = ("dropout", "attention_dropout", "activation_dropout", "encoder_layerdrop", "decoder_layerdrop")


def _type_name(annotation) -> str:
    """A field's annotation as written (`"list[int] | None"`), whether it is a string or a type."""
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None) or str(annotation)


def _method_option_fields() -> type:
    """The options built-in methods declare in their own modules (`Method.config_options`) as the fields of a
    `MarianConfig` subclass that `SyntaxMTConfig` extends: a method adds an option without an edit here."""
    annotations, defaults = {}, {}
    for method in registered():
        for name, option in method.config_options.items():
            if name in annotations or name in {f.name for f in dataclasses.fields(MarianConfig)}:
                raise UserError(f"Method {method.name!r} declares the option {name!r}, which already exists.")
            annotations[name], defaults[name] = _type_name(option.type), option.default
    namespace = {"__module__": __name__, "__qualname__": "MethodOptionFields", "__annotations__": annotations}
    return type("MethodOptionFields", (MarianConfig,), {**namespace, **defaults})


def _options_doc() -> str:
    """The `Args:` entries of the options built-in methods declare, in registry order (appended to
    `SyntaxMTConfig.__doc__`: one documented attribute per option, the HF convention)."""
    entries = []
    for method in registered():
        for name, option in method.config_options.items():
            value = f'`"{option.default}"`' if isinstance(option.default, str) else f"{option.default!r}"
            default = "" if option.default is None else f", defaults to {value}"
            lines = [*inspect.cleandoc(option.doc).splitlines(), f"(Method `{method.name}`.)"]
            doc = "\n".join(f"            {line}" for line in lines)
            shown = (
                _type_name(option.type).replace(" | None", "").replace("float | int", "float")
            )  # as the docs write it
            entries.append(f"        {name} (`{shown}`, *optional*{default}):\n{doc}")
    return "\n" + "\n".join(entries) + "\n" if entries else ""


#: keys our own `save_pretrained` writes for remote code (`remote_code.attach_remote_code`): the Auto classes and the
#: pipeline a directory declares, read back by transformers' loaders
_SAVED_KEYS = ("auto_map", "custom_pipelines")


def _keywords_taken(function) -> set[str]:
    """The keyword names `function` (a method of transformers' config) takes out of a dict or kwargs itself: the
    string given to a `.pop(...)` / `.get(...)` call, and the strings of a list, tuple or set literal (its lists of
    accepted keywords), read from the installed source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    taken = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("pop", "get")
                and node.args and isinstance(node.args[0], ast.Constant)):  # fmt: skip
            taken.add(node.args[0].value)
        elif isinstance(node, ast.List | ast.Tuple | ast.Set):
            taken |= {e.value for e in node.elts if isinstance(e, ast.Constant)}
    return {k for k in taken if isinstance(k, str) and k.isidentifier()}


def _config_reads(module) -> set[str]:
    """The config attributes `module` (transformers' model base) reads by name, `getattr(config, "name", default)`
    or `getattr(self.config, ...)`, read from the installed source (`gradient_checkpointing`, `tie_word_embeddings`)."""
    reads = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"):
            continue
        if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and "config" in (
            getattr(node.args[0], "id", None), getattr(node.args[0], "attr", None)
        ):  # fmt: skip
            reads.add(node.args[1].value)
    return {k for k in reads if isinstance(k, str) and k.isidentifier()}


@functools.cache
def transformers_keys() -> frozenset[str]:
    """The config keys transformers itself writes into or reads from a config.json, derived from the installed classes
    (so a key a new transformers adds passes without an edit here):

    - what a default `PreTrainedConfig` / `MarianConfig` writes (`to_dict()`) or holds (`vars()`): bookkeeping such
      as `transformers_version`, `architectures`, `_name_or_path`, `dtype`, `_attn_implementation_internal`;
    - the attributes and properties of the class and its `attribute_map` aliases (`num_labels`, `use_return_dict`,
      `hidden_size`, `num_attention_heads`, ...);
    - the keys `PreTrainedConfig.__post_init__`, `from_dict` and `_remove_keys_not_serialized` take out or drop
      themselves (`torch_dtype`, `attn_implementation`, `_commit_hash`, `rope_scaling`,
      `base_model_tp_plan`, ...), read from their source;
    - the config attributes transformers' model base (`modeling_utils`) reads by name (`gradient_checkpointing`,
      which a model consumes, `tie_word_embeddings`, ...), read from its source;
    - the generation parameters, which transformers moves from the config into the `GenerationConfig`;
    - what our own `save_pretrained` writes (`auto_map`, `custom_pipelines`).
    """
    from transformers import modeling_utils

    base, marian = PreTrainedConfig(), MarianConfig()
    keys = {*base.to_dict(), *vars(base), *marian.to_dict(), *vars(marian), *MarianConfig.attribute_map}
    keys |= {n for n in dir(MarianConfig) if not n.startswith("__") and not callable(getattr(MarianConfig, n, None))}
    for function in (PreTrainedConfig.__post_init__, PreTrainedConfig.from_dict,
                     PreTrainedConfig._remove_keys_not_serialized):  # fmt: skip
        keys |= _keywords_taken(function)
    keys |= _config_reads(modeling_utils)
    keys |= {*GenerationConfig._get_default_generation_params(), *GenerationConfig().to_dict()}
    return frozenset(keys | set(_SAVED_KEYS))


_LOADING = contextvars.ContextVar("syntax_mt_config_loading", default=False)
_MARIAN_FIELDS = frozenset(f.name for f in dataclasses.fields(MarianConfig))


@strict
class SyntaxMTConfig(_method_option_fields()):
    r"""
    A [`~transformers.MarianConfig`] plus the options of the syntax- and document-aware methods.

    Every Marian option keeps its meaning; a `SyntaxMTConfig` with no method option set builds exactly a Marian
    model. Options are validated on creation and on `save_pretrained`, and round-trip through `config.json`. The
    config is flat: the spine's own options come first below, then each built-in method's, declared in its module
    (`Method.config_options` in `hf_syntax_mt.methods.<module>`) and listed here from the registry.

    Args:
        label_smoothing (`float`, *optional*, defaults to 0.0):
            Label smoothing of the translation loss, computed inside the model so that auxiliary losses survive the
            Trainer (use this instead of `Seq2SeqTrainingArguments.label_smoothing_factor`).
        attention_init (`str`, *optional*, defaults to `"normal"`):
            Initialisation of the attention projections. `"normal"`: Marian's (normal, std `init_std` = 0.02), as a
            `MarianMTModel`. `"xavier"`: fairseq's (Xavier-uniform q/k/v with gain 1/sqrt(2), out projection gain 1),
            whose attention scores start larger. Eqs. 2-3 multiply a PASCAL head's scores by the Gaussian, so with
            scores near 0 the head starts as uniform as a plain one and its gradient is scaled down away from the
            parent; larger scores let the Gaussian act sooner. Only the initial weights change, never Eqs. 1-3.
        syntax_attention_kernel (`str`, *optional*, defaults to `"auto"`):
            Where method heads that change the attention run. `"eager"`: a matmul-softmax path beside the fast kernel
            (the reference, and the fastest for CPU training). `"fused"`: in one kernel with the plain heads wherever
            the method has a fused form that applies: PASCAL as a FlexAttention `score_mod` (compiled on CUDA; used
            without attention dropout, and on the CPU only without gradient), alignment biases as SDPA's additive
            mask. `"auto"` (default): `"fused"` on CUDA, `"eager"` on the CPU. Results are equal up to float
            rounding; `output_attentions=True` and recorded attention always take the eager path.
        task_token_ids (`dict`, *optional*):
            Multi-task learning (Currey & Heafield 2019): `{"translate": id, "parse": id}`, the target-side task
            tokens that choose the task (`hf_syntax_mt.data.multitask`). Generation forces the `"translate"` token
            first unless told otherwise.
        source_parser (`dict`, *optional*):
            How to parse raw source text at inference, as given by `Parser.to_config()`, e.g.
            `{"backend": "spacy", "model": "fr_core_news_sm"}`; the translation pipeline uses it once checked by
            `data.parser_config.parser_from_config` (names only; CoNLL-U paths relative to the model directory).
        alignment_layer (`int`, *optional*):
            Decoder layer whose head-averaged cross-attention is "the alignment" for global fertility, bilingual
            symmetry and `model.align()`. `None` (default): the last of `alignment_bias_layers`, else the last layer.
        symmetry_weight (`float`, *optional*, defaults to 0.0):
            gamma of the bilingual-symmetry trace bonus, used by `SymmetricTranslationModel` (0: off).
        method_options (`dict`, *optional*):
            Options of methods registered outside the package (`hf_syntax_mt.methods.register`), by method name:
            `{"my_method": {...}}`; each method validates its own. A name no registered method has is an error.
    """

    model_type = "syntax_mt"

    label_smoothing: float | int = 0.0
    attention_init: str = "normal"
    syntax_attention_kernel: str = "auto"
    task_token_ids: dict | None = None
    source_parser: dict | None = None
    alignment_layer: int | None = None
    symmetry_weight: float | int = 0.0
    method_options: dict | None = None

    def __post_init__(self, **kwargs):
        unread = self._check_unknown_keys(kwargs)
        for name in _LIST_FIELDS:  # a tuple given for a list field is stored as the list that config.json gives back
            value = getattr(self, name)
            if isinstance(value, tuple):
                setattr(self, name, list(value))
            elif value is not None and not isinstance(value, list):  # "1,1" (one entry per character) or 2
                raise UserTypeError(f"{name}={value!r} must be a list (one entry per layer or item, e.g. [1, 0]), "
                                    f"not a {type(value).__name__}.")  # fmt: skip
        super().__post_init__(**kwargs)
        if unread:
            self._unread_keys = unread  # kept as attributes, never written back (`to_dict`)
        self.validate_syntax_options()  # raise a plain ValueError at creation, not strict's wrapper

    @classmethod
    def _check_unknown_keys(cls, kwargs: dict) -> tuple[str, ...]:
        """An unknown keyword (a typo such as `encoder_pscal_heads`) raises with the closest fields, instead of
        becoming an attribute that nothing reads. Keys transformers writes into config.json pass (`transformers_keys`,
        read from the installed transformers). Loading a file (`from_dict`, `from_pretrained`) refuses only a key that
        looks like a typo of an option this package adds, and keeps the other unknown keys (those of another tool or
        of an older transformers, e.g. an opus-mt conversion's) with one warning naming them, so that such files still
        load; they are returned, and `to_dict` leaves them out (a config re-created from it, or saved, is clean)."""
        fields = sorted(f.name for f in dataclasses.fields(cls))
        ours = sorted(set(fields) - _MARIAN_FIELDS)
        kept = []
        for key in kwargs:
            if key in transformers_keys():
                continue
            if _LOADING.get():
                close = difflib.get_close_matches(key, ours, n=3, cutoff=0.8)
                if not close:
                    kept.append(key)
                    continue
            else:
                close = difflib.get_close_matches(key, fields, n=3, cutoff=0.8)
                close = close or difflib.get_close_matches(key, fields, n=3)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise UserError(
                f"{cls.__name__} has no option {key!r}.{hint} (The options are the fields of SyntaxMTConfig and "
                "MarianConfig; see help(SyntaxMTConfig).)"
            )
        if kept:  # one warning for the file
            keys = ", ".join(map(repr, kept))
            what = f"key {keys} is not an option" if len(kept) == 1 else f"keys {keys} are not options"
            logger.warning(f"{cls.__name__}: config {what} of this model (written by another tool or an older "
                           "transformers); kept, but nothing reads them.")  # fmt: skip
        return tuple(kept)

    def to_dict(self) -> dict:
        """`PreTrainedConfig.to_dict`, without the keys a loaded file had that nothing reads (`_check_unknown_keys`)."""
        values = super().to_dict()
        for key in (*values.pop("_unread_keys", ()), "_unread_keys"):
            values.pop(key, None)
        return values

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """`PreTrainedConfig.from_dict`; unknown keys of a stored config warn unless they look like typos."""
        return_unused = kwargs.pop("return_unused_kwargs", False)
        token = _LOADING.set(True)
        try:
            config, unused = super().from_dict(config_dict, return_unused_kwargs=True, **kwargs)
        finally:
            _LOADING.reset(token)
        fields = sorted(f.name for f in dataclasses.fields(cls))
        for key in unused:  # from_pretrained(path, encoder_pscal_heads=...) would silently drop the option
            if close := difflib.get_close_matches(key, fields, n=3, cutoff=0.8):
                raise UserError(f"{cls.__name__} has no option {key!r}. Did you mean {' or '.join(map(repr, close))}?")
        return (config, unused) if return_unused else config

    @classmethod
    def from_json_file(cls, json_file):
        """`PreTrainedConfig.from_json_file`, loading like `from_dict` (unknown keys warn unless they look like typos)."""
        token = _LOADING.set(True)
        try:
            return super().from_json_file(json_file)
        finally:
            _LOADING.reset(token)

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        """Read a `config.json`; a Marian one (opus-mt style) is upgraded to `syntax_mt` for retrofitting."""
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if config_dict.get("model_type") == "marian":
            config_dict = {**config_dict, "model_type": cls.model_type, "architectures": None}
        return config_dict, kwargs

    def parse_columns(self) -> list[str]:
        """The input columns this config's methods compute from the source parse, each a `methods.Column` (a `str`
        with its kind; asked by the pipeline; the config answers from its own registry, so a model loaded as remote
        code answers for its own methods)."""
        return parse_columns(self)

    @property
    def needs_source_parse(self) -> bool:
        """Whether the model's *inputs* depend on a source parse at inference (PASCAL, syntax-directed heads, input
        features: the methods whose inputs come from the parse). Bi-affine heads (DBSA, LISA) need parses for
        training only."""
        return bool(parse_columns(self))

    def encoder_head_layout(self, layer_idx: int) -> dict[str, int]:
        """Number of heads of each kind (`"pascal"`, `"tree"`, `"lisa"`, `"dbsa"`, ...) in encoder layer
        `layer_idx`, in head order (the registry's, `hf_syntax_mt.methods.head_kinds`); kinds without heads in the
        layer are left out, and the remaining heads are standard."""
        kinds = head_kinds(self, "encoder", layer_idx, self.encoder_attention_heads)
        return {kind: stop - start for kind, start, stop in kinds}

    @property
    def resolved_alignment_layer(self) -> int:
        """The decoder layer that gives alignments: `alignment_layer`, else the last biased layer, else the last."""
        if self.alignment_layer is not None:
            return self.alignment_layer
        if self.alignment_bias_layers:
            return self.alignment_bias_layers[-1]
        return self.decoder_layers - 1

    def _validate_marian_options(self):
        """Sizes, probabilities and the activation, checked before torch sees them (whose errors name no option)."""
        from transformers.activations import ACT2FN

        for name in _POSITIVE_INTS:
            check_int(self, name, 1)
        for name in _NUMBERS:
            check_finite(self, name)
        for name in _PROBABILITIES:
            check_probability(self, name)
        for side in ("encoder", "decoder"):
            heads = getattr(self, f"{side}_attention_heads")
            if self.d_model % heads:
                raise UserError(
                    f"d_model={self.d_model} is not divisible by {side}_attention_heads={heads}: each head gets "
                    "d_model / heads dimensions."
                )
        if self.activation_function not in ACT2FN:
            close = difflib.get_close_matches(str(self.activation_function), sorted(ACT2FN), n=3)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise UserError(
                f"activation_function={self.activation_function!r} is not a transformers activation{hint}: use one of "
                f"{sorted(ACT2FN)}."
            )

    def check_token_ids(self):
        """Raise where the model cannot work: a `pad_token_id` (the embeddings' padding row) or
        `decoder_start_token_id` outside the vocabulary. Checked when a model is built, not when the config is
        (transformers warns there), so that a config from defaults with a small vocabulary still builds."""
        vocab = self.vocab_size if self.decoder_vocab_size is None else min(self.vocab_size, self.decoder_vocab_size)
        for name in ("pad_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < vocab:
                raise UserError(
                    f"{name}={value} is not a token id of the vocabulary (vocab_size={self.vocab_size}): use the "
                    f"tokenizer's id, e.g. {name}=tokenizer.pad_token_id."
                )

    def validate_syntax_options(self):
        """Part of `@strict` validation: every syntax option, with an error that says what to change."""
        self._validate_marian_options()
        check_choice(self, "attention_init", ATTENTION_INITS)
        check_choice(
            self, "syntax_attention_kernel", ATTENTION_KERNELS, "'auto': fused kernels on CUDA, eager on the CPU"
        )
        if self.task_token_ids is not None:
            if set(self.task_token_ids) != {"translate", "parse"} or not all(
                isinstance(v, int) and 0 <= v < self.vocab_size for v in self.task_token_ids.values()
            ):
                raise UserError(
                    f"task_token_ids={self.task_token_ids!r} must map 'translate' and 'parse' to token ids in "
                    f"0..{self.vocab_size - 1}; build it with `hf_syntax_mt.data.multitask.add_task_tokens`."
                )
        if not 0.0 <= self.label_smoothing < 1.0:
            raise UserError(f"label_smoothing={self.label_smoothing} must be in [0, 1).")
        if self.source_parser is not None and "backend" not in self.source_parser:
            raise UserError(
                f"source_parser={self.source_parser!r} needs a 'backend' key ('stanza', 'spacy' or 'conllu'); "
                "build it with `parser.to_config()`."
            )
        check_decoder_layer(self, "alignment_layer", "or None for the last biased layer")
        check_weight(self, "symmetry_weight")
        methods = {m.name for m in registered()}
        if self.method_options is not None:
            if not isinstance(self.method_options, dict) or any(
                not isinstance(v, dict) for v in self.method_options.values()
            ):
                raise UserError(f"method_options={self.method_options!r} must map method names to dicts of options.")
            unknown = sorted(set(self.method_options) - methods)
            if unknown:
                raise UserError(
                    f"method_options names {unknown}, which no registered method has (registered: {sorted(methods)}): "
                    "import the module that registers it (`hf_syntax_mt.methods.register`) before building the config."
                )
        for method in registered():  # each method checks the options it declares, then their combination
            late = [n for n in method.config_options if n not in _TYPES]
            # declared options are fields for the methods registered before SyntaxMTConfig was created (the built-in
            # ones); a method registered later keeps them in method_options[name], checked as fields are
            check_options(method, _LateOptions(self, method) if late else self)

        for site in SITES:  # the heads the methods take fit in every attention
            side = "encoder" if site == "encoder" else "decoder"
            for layer in range(getattr(self, f"{side}_layers")):
                head_layout(self, site, layer, getattr(self, f"{side}_attention_heads"))

    @property
    def resolved_max_context_length(self) -> int:
        return self.max_context_length if self.max_context_length is not None else self.max_position_embeddings


class _LateOptions:
    """A config as a method registered after `SyntaxMTConfig` was created sees it when its options are checked: the
    options it declares read from ``method_options[name]`` (their defaults where not given), everything else from
    the config. A key of ``method_options[name]`` the method does not declare is refused."""

    def __init__(self, config, method):
        given = (config.method_options or {}).get(method.name, {})
        declared = method.config_options
        unknown = sorted(set(given) - set(declared))
        if unknown:
            close = difflib.get_close_matches(unknown[0], list(declared), n=2)
            hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise UserError(f"method_options[{method.name!r}] has {unknown}, which {method.name} does not declare "
                            f"(its options: {sorted(declared)}).{hint}")  # fmt: skip
        self._config, self._values = config, {n: given.get(n, o.default) for n, o in declared.items()}

    def __getattr__(self, name: str):
        if name in self._values:
            return self._values[name]
        return getattr(self._config, name)


if _options_doc():  # the options methods declare, in help(SyntaxMTConfig) beside the others
    SyntaxMTConfig.__doc__ = SyntaxMTConfig.__doc__.rstrip() + _options_doc() + "    "


# what each field needs, read once from the fields' types (declared once: on SyntaxMTConfig or by a method's Option)
_TYPES = {f.name: _type_name(f.type).replace(" ", "") for f in dataclasses.fields(SyntaxMTConfig)}
#: fields typed `list[...]` (per-layer head counts, layer lists, names): a tuple given for one is stored as a list
_LIST_FIELDS = tuple(name for name, t in _TYPES.items() if t.startswith("list["))
#: fields typed `float` or `float | int` (weights, widths, probabilities): each must be a finite number
_NUMBERS = tuple(name for name, t in _TYPES.items() if t in ("float", "float|int", "int|float"))


__all__ = ["SyntaxMTConfig"]
