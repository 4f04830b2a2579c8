"""Configuration of the syntax-aware Marian models (`model_type = "syntax_mt"`)."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import MarianConfig

PASCAL_WEIGHTINGS = ("gaussian", "parent_only")
ALIGNMENT_BIASES = ("position", "markov", "fertility")


@strict
class SyntaxMTConfig(MarianConfig):
    r"""
    A [`~transformers.MarianConfig`] plus the options of the syntax-aware attention variants.

    Every Marian option keeps its meaning; a `SyntaxMTConfig` with no syntax option set builds exactly a Marian
    model. Options are validated on creation and on `save_pretrained`, and round-trip through `config.json`.

    Args:
        encoder_pascal_heads (`list[int]`, *optional*):
            Number of PASCAL (parent-scaled self-attention, Bugliarello & Okazaki 2020) heads in each encoder layer,
            one entry per layer: heads `0..k-1` of layer `l` are PASCAL heads when `encoder_pascal_heads[l] == k`.
            `None` (default) or all zeros: no PASCAL head. The paper's setting puts them in the first layer, e.g.
            `[8, 0, 0, 0, 0, 0]`.
        pascal_sigma (`float`, *optional*, defaults to 1.0):
            Standard deviation of the Gaussian N(j; p_t, sigma^2) around the parent's middle position (paper: 1).
        pascal_weighting (`str`, *optional*, defaults to `"gaussian"`):
            `"gaussian"` (Eq. 3 of the paper) or `"parent_only"` (the paper's ablation: weight 1 on the parent's
            middle token(s), i.e. every j with |j - p_t| <= 0.5, and 0 elsewhere).
        parent_ignoring (`float`, *optional*, defaults to 0.0):
            Probability q of replacing a row of D_p by ones during training (the paper's "parent ignoring"
            regulariser). Never applied in evaluation mode.
        label_smoothing (`float`, *optional*, defaults to 0.0):
            Label smoothing of the translation loss, computed inside the model so that auxiliary losses survive the
            Trainer (use this instead of `Seq2SeqTrainingArguments.label_smoothing_factor`).
        source_parser (`dict`, *optional*):
            How to parse raw source text at inference, as given by `Parser.to_config()`, e.g.
            `{"backend": "spacy", "model": "fr_core_news_sm"}`; the translation pipeline uses it.
        alignment_bias_layers (`list[int]`, *optional*):
            Decoder layers (indices `0..decoder_layers-1`) whose cross-attention gets the structural alignment
            biases of Cohn et al. (2016) in every head (see `hf_syntax_mt.alignment`). `None` (default): none.
        alignment_biases (`list[str]`, *optional*):
            Which biases those layers add, a non-empty subset of `["position", "markov", "fertility"]`: position bias
            (Eq. 6), Markov condition (Eq. 7) and local fertility. `None` (default): all three.
        alignment_window (`int`, *optional*, defaults to 2):
            k of the Markov and local-fertility features, which look at source positions i-k..i+k.
        alignment_bias_hidden_size (`int`, *optional*, defaults to 16):
            Width A of the small tanh layer that maps the features to one logit bias per head.
        alignment_layer (`int`, *optional*):
            Decoder layer whose head-averaged cross-attention is "the alignment" for global fertility, bilingual
            symmetry and `model.align()`. `None` (default): the last of `alignment_bias_layers`, else the last layer.
        global_fertility_weight (`float`, *optional*, defaults to 0.0):
            Weight of the global-fertility negative log-likelihood added to the loss (0: off, no parameter added).
        global_fertility_start_step (`int`, *optional*, defaults to 0):
            Training step from which the global-fertility loss is added (the paper's pre-training schedule: train
            without it first). Steps come from `AlignmentTrainingCallback` or `model.alignment_training_step`.
        symmetry_weight (`float`, *optional*, defaults to 0.0):
            gamma of the bilingual-symmetry trace bonus, used by `SymmetricTranslationModel` (0: off).
    """

    model_type = "syntax_mt"

    encoder_pascal_heads: list[int] | None = None
    pascal_sigma: float | int = 1.0
    pascal_weighting: str = "gaussian"
    parent_ignoring: float | int = 0.0
    label_smoothing: float | int = 0.0
    source_parser: dict | None = None
    alignment_bias_layers: list[int] | None = None
    alignment_biases: list[str] | None = None
    alignment_window: int = 2
    alignment_bias_hidden_size: int = 16
    alignment_layer: int | None = None
    global_fertility_weight: float | int = 0.0
    global_fertility_start_step: int = 0
    symmetry_weight: float | int = 0.0

    def __post_init__(self, **kwargs):
        if self.encoder_pascal_heads is not None:
            self.encoder_pascal_heads = list(self.encoder_pascal_heads)
        for name in ("alignment_bias_layers", "alignment_biases"):
            if getattr(self, name) is not None:
                setattr(self, name, list(getattr(self, name)))
        super().__post_init__(**kwargs)
        self.validate_syntax_options()  # raise a plain ValueError at creation, not strict's wrapper

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        """Read a `config.json`; a Marian one (opus-mt style) is upgraded to `syntax_mt` for retrofitting."""
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if config_dict.get("model_type") == "marian":
            config_dict = {**config_dict, "model_type": cls.model_type, "architectures": None}
        return config_dict, kwargs

    @property
    def uses_pascal(self) -> bool:
        return any(self.encoder_pascal_heads or [])

    def pascal_heads_of_layer(self, layer_idx: int) -> int:
        """Number of PASCAL heads in encoder layer `layer_idx` (0 when none)."""
        return self.encoder_pascal_heads[layer_idx] if self.encoder_pascal_heads else 0

    @property
    def uses_global_fertility(self) -> bool:
        return self.global_fertility_weight > 0

    def alignment_biases_of_layer(self, layer_idx: int) -> tuple[str, ...]:
        """The structural biases of decoder layer `layer_idx`'s cross-attention (empty when none)."""
        if not self.alignment_bias_layers or layer_idx not in self.alignment_bias_layers:
            return ()
        return tuple(b for b in ALIGNMENT_BIASES if b in (self.alignment_biases or ALIGNMENT_BIASES))

    @property
    def resolved_alignment_layer(self) -> int:
        """The decoder layer that gives alignments: `alignment_layer`, else the last biased layer, else the last."""
        if self.alignment_layer is not None:
            return self.alignment_layer
        if self.alignment_bias_layers:
            return self.alignment_bias_layers[-1]
        return self.decoder_layers - 1

    def validate_syntax_options(self):
        """Part of `@strict` validation: every syntax option, with an error that says what to change."""
        heads = self.encoder_pascal_heads
        if heads is not None:
            if len(heads) != self.encoder_layers:
                raise ValueError(
                    f"encoder_pascal_heads has {len(heads)} entries but the model has encoder_layers="
                    f"{self.encoder_layers}: give one number of PASCAL heads per encoder layer, e.g. "
                    f"{[self.encoder_attention_heads] + [0] * (self.encoder_layers - 1)}."
                )
            for layer, k in enumerate(heads):
                if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= self.encoder_attention_heads:
                    raise ValueError(
                        f"encoder_pascal_heads[{layer}]={k!r} but encoder_attention_heads="
                        f"{self.encoder_attention_heads}: each entry must be an int in 0..{self.encoder_attention_heads}."
                    )
        if not self.pascal_sigma > 0:
            raise ValueError(f"pascal_sigma={self.pascal_sigma} must be > 0 (the paper uses 1.0).")
        if self.pascal_weighting not in PASCAL_WEIGHTINGS:
            raise ValueError(f"pascal_weighting={self.pascal_weighting!r} must be one of {PASCAL_WEIGHTINGS}.")
        if not 0.0 <= self.parent_ignoring <= 1.0:
            raise ValueError(f"parent_ignoring={self.parent_ignoring} is a probability: it must be in [0, 1].")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing={self.label_smoothing} must be in [0, 1).")
        if self.source_parser is not None and "backend" not in self.source_parser:
            raise ValueError(
                f"source_parser={self.source_parser!r} needs a 'backend' key ('stanza', 'spacy' or 'conllu'); "
                "build it with `parser.to_config()`."
            )
        self._validate_alignment_options()

    def _validate_alignment_options(self):
        """Structural alignment biases, global fertility and bilingual symmetry (issue 4)."""
        n = self.decoder_layers
        layers = self.alignment_bias_layers
        if layers is not None:
            for layer in layers:
                if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < n:
                    raise ValueError(
                        f"alignment_bias_layers contains {layer!r} but the model has decoder_layers={n}: give decoder "
                        f"layer indices in 0..{n - 1}, e.g. [{n - 1}]."
                    )
            if len(set(layers)) != len(layers):
                raise ValueError(f"alignment_bias_layers={layers} lists a layer twice: give each layer once.")
        biases = self.alignment_biases
        if biases is not None:
            unknown = [b for b in biases if b not in ALIGNMENT_BIASES]
            if unknown or not biases:
                raise ValueError(
                    f"alignment_biases={biases!r}: give a non-empty subset of {list(ALIGNMENT_BIASES)} (or None for all)."
                )
            if not layers:
                raise ValueError(
                    f"alignment_biases={biases!r} is set but alignment_bias_layers is empty: choose the decoder layers "
                    f"that get them, e.g. alignment_bias_layers=[{n - 1}]."
                )
        window = self.alignment_window
        if not isinstance(window, int) or isinstance(window, bool) or window < 0:
            raise ValueError(f"alignment_window={window!r} must be an int >= 0 (k: features over i-k..i+k, e.g. 2).")
        hidden = self.alignment_bias_hidden_size
        if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 1:
            raise ValueError(f"alignment_bias_hidden_size={hidden!r} must be an int >= 1 (e.g. 16).")
        layer = self.alignment_layer
        if layer is not None and (not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < n):
            raise ValueError(
                f"alignment_layer={layer!r} but the model has decoder_layers={n}: give a decoder layer index in "
                f"0..{n - 1}, or None for the last biased layer."
            )
        for name in ("global_fertility_weight", "symmetry_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not value >= 0 or value == float("inf"):
                raise ValueError(f"{name}={value!r} must be a finite number >= 0 (0 switches it off).")
        start = self.global_fertility_start_step
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise ValueError(
                f"global_fertility_start_step={start!r} must be an int >= 0 (the training step that switches the "
                "global-fertility loss on; 0: from the start)."
            )


__all__ = ["SyntaxMTConfig"]
