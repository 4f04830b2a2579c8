"""Configuration of the syntax-aware Marian models (`model_type = "syntax_mt"`)."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import MarianConfig

PASCAL_WEIGHTINGS = ("gaussian", "parent_only")


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
    """

    model_type = "syntax_mt"

    encoder_pascal_heads: list[int] | None = None
    pascal_sigma: float | int = 1.0
    pascal_weighting: str = "gaussian"
    parent_ignoring: float | int = 0.0
    label_smoothing: float | int = 0.0
    source_parser: dict | None = None

    def __post_init__(self, **kwargs):
        if self.encoder_pascal_heads is not None:
            self.encoder_pascal_heads = list(self.encoder_pascal_heads)
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


__all__ = ["SyntaxMTConfig"]
