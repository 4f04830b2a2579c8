"""Syntax-aware Marian models: PASCAL parent-scaled self-attention heads in chosen encoder layers.

The models subclass Marian and keep its module names, so every weight of a `MarianMTModel` checkpoint loads into
them ("retrofit"). Syntax heads run through one eager score path; the other heads of the same layer keep the fast
attention kernel (SDPA by default), and the two are concatenated before `out_proj`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from transformers import GenerationMixin
from transformers.cache_utils import EncoderDecoderCache
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.marian.modeling_marian import (
    MarianAttention,
    MarianDecoder,
    MarianDecoderLayer,
    MarianEncoder,
    MarianEncoderLayer,
    MarianModel,
    MarianMTModel,
    MarianPreTrainedModel,
    eager_attention_forward,
    shift_tokens_right,
)
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .alignment import (
    GlobalFertility,
    StructuralAlignmentBias,
    log_auxiliary_losses,
    recording_alignment,
    structural_alignment_attention,
)
from .configuration_syntax_mt import SyntaxMTConfig

# Gaussian weights whose exponent is below -_MAX_EXPONENT are set to exactly 0: exp(-80) ~ 1.8e-35 is still a normal
# float32, while the far tail underflows to denormals that make CPU matmuls 3-5x slower.
_MAX_EXPONENT = 80.0


def pascal_weights(
    parent_positions: torch.Tensor,
    key_length: int,
    sigma: float,
    weighting: str = "gaussian",
) -> torch.Tensor:
    """D_p of the PASCAL paper: the weight of every key position j for every query token t.

    Args:
        parent_positions: `(B, T)` float, p_t = middle position (in subword tokens) of token t's parent word.
        key_length: S, the number of key positions.
        sigma: standard deviation of the Gaussian.
        weighting: `"gaussian"` (Eq. 3) or `"parent_only"` (1 where |j - p_t| <= 0.5, else 0).

    Returns:
        `(B, T, S)` float tensor.
    """
    j = torch.arange(key_length, device=parent_positions.device, dtype=torch.float32)  # (S,)
    dist = j.view(1, 1, -1) - parent_positions.float().unsqueeze(-1)  # (B, T, S)
    if weighting == "parent_only":
        return (dist.abs() <= 0.5).float()
    # Eq. 3: dist(p_t, j) = 1 / sqrt(2 pi sigma^2) * exp(-(j - p_t)^2 / (2 sigma^2))
    exponent = dist.square() / (2.0 * sigma**2)  # (B, T, S)
    weights = torch.exp(-exponent) / math.sqrt(2.0 * math.pi * sigma**2)
    return weights.masked_fill(exponent > _MAX_EXPONENT, 0.0)


def _additive_mask(
    attention_mask: torch.Tensor | None, query_length: int, key_length: int, is_causal: bool, dtype, device
) -> torch.Tensor | None:
    """Turn any mask the attention interface may receive into an additive float mask `(B|1, 1, T, S)`.

    Under SDPA the mask may be `None` (no padding; causality via `is_causal`) or boolean (True = attend); under
    eager it is already additive.
    """
    min_value = torch.finfo(dtype).min
    if attention_mask is None:
        if not is_causal or query_length == 1:
            return None
        # causal with an offset: query t (of T, the last T of S positions) sees keys 0..S-T+t
        q = torch.arange(query_length, device=device).view(-1, 1) + (key_length - query_length)
        k = torch.arange(key_length, device=device).view(1, -1)
        return torch.zeros(1, 1, query_length, key_length, dtype=dtype, device=device).masked_fill(k > q, min_value)
    if attention_mask.dtype == torch.bool:
        return torch.zeros_like(attention_mask, dtype=dtype).masked_fill(~attention_mask, min_value)
    return attention_mask.to(dtype)


class SyntaxMTAttention(MarianAttention):
    """Marian multi-head attention whose first `num_pascal_heads` heads are PASCAL heads.

    With `num_pascal_heads == 0` this is exactly `MarianAttention`, except that `output_attentions=True` returns the
    probabilities of every head whatever the attention implementation (SDPA returns none).
    """

    def __init__(self, *args, num_pascal_heads: int = 0, alignment_bias: nn.Module | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.num_pascal_heads = num_pascal_heads
        # issue 4: structural alignment bias (cross-attention only); recording feeds the alignment-based losses
        self.alignment_bias = alignment_bias
        self.record_alignment, self.recorded_alignment = False, None

    def _project(self, hidden_states, key_value_states, past_key_values):
        """q, k, v `(B, H, T|S, d)` with Marian's cache handling (self- and cross-attention)."""
        is_cross_attention = key_value_states is not None
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)  # (B, H, T, d)
        cache, is_updated = past_key_values, False
        if isinstance(past_key_values, EncoderDecoderCache):
            is_updated = past_key_values.is_updated.get(self.layer_idx)
            cache = past_key_values.cross_attention_cache if is_cross_attention else past_key_values.self_attention_cache
        if is_cross_attention and past_key_values is not None and is_updated:
            return query, cache.layers[self.layer_idx].keys, cache.layers[self.layer_idx].values
        current = key_value_states if is_cross_attention else hidden_states
        kv_shape = (*current.shape[:-1], -1, self.head_dim)
        key = self.k_proj(current).view(kv_shape).transpose(1, 2)  # (B, H, S, d)
        value = self.v_proj(current).view(kv_shape).transpose(1, 2)  # (B, H, S, d)
        if past_key_values is not None:
            key, value = cache.update(key, value, self.layer_idx)
            if is_cross_attention and isinstance(past_key_values, EncoderDecoderCache):
                past_key_values.is_updated[self.layer_idx] = True
        return query, key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values=None,
        attention_mask: torch.Tensor | None = None,
        parent_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`hidden_states` `(B, T, D)`; `parent_positions` `(B, T)` (self-attention with PASCAL heads only)."""
        output_attentions = kwargs.get("output_attentions", False)
        plain = self.alignment_bias is None and not self.record_alignment
        if self.num_pascal_heads == 0 and not output_attentions and plain:
            return super().forward(hidden_states, key_value_states, past_key_values, attention_mask, **kwargs)

        input_shape = hidden_states.shape[:-1]  # (B, T)
        query, key, value = self._project(hidden_states, key_value_states, past_key_values)
        k = self.num_pascal_heads
        dropout = self.dropout if self.training else 0.0
        mask = _additive_mask(
            attention_mask, query.shape[2], key.shape[2], self.is_causal and key_value_states is None,
            query.dtype, query.device,
        )  # (B|1, 1, T, S) or None  # fmt: skip
        if not plain:  # issue 4: structural alignment biases (see hf_syntax_mt.alignment)
            out, p = structural_alignment_attention(self, query, key, value, mask, past_key_values, dropout)
            attn_output = self.out_proj(out.reshape(*input_shape, -1).contiguous())  # (B, T, D)
            return attn_output, p if output_attentions else None

        outputs, probs = [], []
        if k > 0:
            if parent_positions is None:
                raise ValueError(
                    f"This layer has {k} PASCAL heads and needs `parent_positions` (B, S): parse the source with "
                    "`hf_syntax_mt.data.SyntaxMTPreprocessor` or translate with the `syntax-translation` pipeline."
                )
            out, p = self._pascal(query[:, :k], key[:, :k], value[:, :k], mask, parent_positions, dropout)
            outputs.append(out)  # (B, T, k, d)
            probs.append(p)
        if k < self.num_heads:
            q, kk, v = query[:, k:], key[:, k:], value[:, k:]  # (B, H-k, T|S, d)
            if output_attentions:
                out, p = eager_attention_forward(self, q, kk, v, mask, scaling=self.scaling, dropout=dropout)
            else:
                interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
                    self.config._attn_implementation, eager_attention_forward
                )
                out, p = interface(self, q, kk, v, attention_mask, dropout=dropout, scaling=self.scaling, **kwargs)
            outputs.append(out)  # (B, T, H-k, d)
            probs.append(p)
        attn_output = torch.cat(outputs, dim=2) if len(outputs) > 1 else outputs[0]  # (B, T, H, d)
        attn_output = self.out_proj(attn_output.reshape(*input_shape, -1).contiguous())  # (B, T, D)
        attn_weights = torch.cat(probs, dim=1) if output_attentions else None  # (B, H, T, S)
        return attn_output, attn_weights

    def _pascal(self, query, key, value, mask, parent_positions, dropout):
        """PASCAL heads: `query`/`key`/`value` `(B, k, T, d)`; returns `(B, T, k, d)` and probabilities `(B, k, T, S)`."""
        scores = torch.matmul(query, key.transpose(2, 3)) * self.scaling  # Eq. 1: S = Q K^T / sqrt(d), (B, k, T, S)
        weights = pascal_weights(
            parent_positions, key.shape[2], self.config.pascal_sigma, self.config.pascal_weighting
        )  # D_p, (B, T, S)
        if self.training and self.config.parent_ignoring > 0:
            # parent ignoring: each row d_t of D_p is set to 1 with probability q, during training only
            ignore = torch.rand(weights.shape[:2], device=weights.device) < self.config.parent_ignoring  # (B, T)
            weights = weights.masked_fill(ignore.unsqueeze(-1), 1.0)
        scores = scores * weights.unsqueeze(1).to(scores.dtype)  # Eq. 2: n_tj = s_tj * d^p_tj, (B, k, T, S)
        if mask is not None:
            scores = scores + mask
        probs = nn.functional.softmax(scores, dim=-1)  # (B, k, T, S)
        out = torch.matmul(nn.functional.dropout(probs, p=dropout, training=self.training), value)  # (B, k, T, d)
        return out.transpose(1, 2), probs


class SyntaxMTEncoderLayer(MarianEncoderLayer):
    """Marian encoder layer whose self-attention may have PASCAL heads."""

    def __init__(self, config: SyntaxMTConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        self.self_attn = SyntaxMTAttention(
            embed_dim=self.embed_dim,
            num_heads=config.encoder_attention_heads,
            dropout=config.attention_dropout,
            config=config,
            layer_idx=layer_idx,
            num_pascal_heads=config.pascal_heads_of_layer(layer_idx),
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        parent_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        residual = hidden_states
        hidden_states, _ = self.self_attn(
            hidden_states, attention_mask=attention_mask, parent_positions=parent_positions, **kwargs
        )
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = self.self_attn_layer_norm(residual + hidden_states)

        residual = hidden_states
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        hidden_states = self.fc2(hidden_states)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        return self.final_layer_norm(residual + hidden_states)


class SyntaxMTDecoderLayer(MarianDecoderLayer):
    """Marian decoder layer; its attention modules return probabilities under any kernel."""

    def __init__(self, config: SyntaxMTConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        common = dict(dropout=config.attention_dropout, is_decoder=True, config=config, layer_idx=layer_idx)
        self.self_attn = SyntaxMTAttention(self.embed_dim, config.decoder_attention_heads, is_causal=True, **common)
        biases = config.alignment_biases_of_layer(layer_idx)
        alignment_bias = (
            StructuralAlignmentBias(
                config.decoder_attention_heads, biases, config.alignment_window, config.alignment_bias_hidden_size
            )
            if biases
            else None
        )
        self.encoder_attn = SyntaxMTAttention(
            self.embed_dim, config.decoder_attention_heads, alignment_bias=alignment_bias, **common
        )


# Auto class -> (shim module saved beside the weights, class, what the shim imports)
_SHIMS = {
    "AutoConfig": ("configuration_syntax_mt", "SyntaxMTConfig", "hf_syntax_mt.configuration_syntax_mt import SyntaxMTConfig"),
    "AutoModel": ("modeling_syntax_mt", "SyntaxMTModel", "hf_syntax_mt.modeling_syntax_mt import SyntaxMTModel"),
    "AutoModelForSeq2SeqLM": (
        "modeling_syntax_mt",
        "SyntaxMTForConditionalGeneration",
        "hf_syntax_mt.modeling_syntax_mt import SyntaxMTForConditionalGeneration, SyntaxMTModel",
    ),
}


class SyntaxMTPreTrainedModel(MarianPreTrainedModel):
    config_class = SyntaxMTConfig
    config: SyntaxMTConfig
    # PASCAL adds no parameter: every weight has Marian's name, so Marian checkpoints load as they are.
    _no_split_modules = ["SyntaxMTEncoderLayer", "SyntaxMTDecoderLayer"]

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, StructuralAlignmentBias):  # issue 4: raw parameters, not nn.Linear
            module.reset_parameters()

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedModel.save_pretrained` plus the declarations that let the directory load anywhere the package
        is installed: `auto_map` (Auto classes with `trust_remote_code=True`) and `custom_pipelines`, which routes
        `pipeline("translation", model=DIR, trust_remote_code=True)` to `SyntaxTranslationPipeline`. The files it
        names are one-line shims that import the installed `hf_syntax_mt`."""
        self.config.auto_map = {name: f"{module}.{cls}" for name, (module, cls, _) in _SHIMS.items()}
        self.config.custom_pipelines = {
            "translation": {
                "impl": "pipeline_syntax_mt.SyntaxTranslationPipeline",
                "pt": ["AutoModelForSeq2SeqLM"],
                "tf": [],
                "type": "text",
            }
        }
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            files = {module: source for module, _, source in _SHIMS.values()}
            files["pipeline_syntax_mt"] = "hf_syntax_mt.pipeline_syntax_mt import SyntaxTranslationPipeline"
            for module, source in files.items():
                with open(os.path.join(save_directory, f"{module}.py"), "w", encoding="utf-8") as f:
                    f.write(f'"""Written by hf-syntax-mt: `pip install hf-syntax-mt`."""\n\nfrom {source}  # noqa: F401\n')


def check_parent_positions(parent_positions: torch.Tensor, input_shape: torch.Size, attention_mask=None) -> None:
    """Raise a clear error for `parent_positions` of the wrong shape or out of range (before any kernel runs)."""
    if parent_positions.shape != input_shape:
        raise ValueError(
            f"parent_positions has shape {tuple(parent_positions.shape)} but input_ids has shape "
            f"{tuple(input_shape)}: give one parent position per input token (B, S)."
        )
    if parent_positions.is_floating_point() and not torch.isfinite(parent_positions).all():
        raise ValueError("parent_positions contains NaN or infinite values.")
    valid = parent_positions >= 0
    valid &= parent_positions <= input_shape[-1] - 1
    if attention_mask is not None:
        valid |= attention_mask == 0  # padding may hold anything
    if not bool(valid.all()):
        b, t = (~valid).nonzero()[0].tolist()
        raise ValueError(
            f"parent_positions[{b}, {t}] = {parent_positions[b, t].item()} is outside 0..{input_shape[-1] - 1}: "
            "parent positions index subword tokens of the same (truncated) sequence."
        )


class SyntaxMTEncoder(MarianEncoder):
    """Marian encoder whose layers may hold PASCAL heads; takes `parent_positions` `(B, S)`."""

    _can_record_outputs = {"hidden_states": SyntaxMTEncoderLayer, "attentions": SyntaxMTAttention}

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)
        self.layers = nn.ModuleList([SyntaxMTEncoderLayer(config, i) for i in range(config.encoder_layers)])
        self.post_init()

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        parent_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids) * self.embed_scale
        seq_len = inputs_embeds.shape[1]
        if seq_len > self.max_source_positions:
            raise ValueError(
                f"The input has {seq_len} tokens but max_position_embeddings={self.max_source_positions}: truncate "
                "the source (`SyntaxMTPreprocessor(max_source_length=...)` or `tokenizer(..., truncation=True)`)."
            )
        if self.config.uses_pascal:
            if parent_positions is None:
                raise ValueError(
                    f"This model has PASCAL heads (encoder_pascal_heads={self.config.encoder_pascal_heads}) and "
                    "needs `parent_positions` (B, S): prepare data with `hf_syntax_mt.data.SyntaxMTPreprocessor` or "
                    "translate raw text with `pipeline('syntax-translation', model=...)`."
                )
            check_parent_positions(parent_positions, inputs_embeds.shape[:2], attention_mask)

        hidden_states = inputs_embeds + self.embed_positions(inputs_embeds.shape[:-1])  # (B, S, D)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask
        )
        for layer in self.layers:
            if self.training and self.layerdrop > 0.0 and torch.rand([]) < self.layerdrop:
                continue
            hidden_states = layer(hidden_states, mask, parent_positions=parent_positions, **kwargs)
        return BaseModelOutput(last_hidden_state=hidden_states)


class SyntaxMTDecoder(MarianDecoder):
    """Marian decoder whose attention modules return probabilities under any kernel."""

    _can_record_outputs = {
        "hidden_states": SyntaxMTDecoderLayer,
        "attentions": OutputRecorder(SyntaxMTAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(SyntaxMTAttention, index=1, layer_name="encoder_attn"),
    }

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)
        self.layers = nn.ModuleList([SyntaxMTDecoderLayer(config, i) for i in range(config.decoder_layers)])
        self.post_init()

    def _init_weights(self, module):
        # the decoder is a PreTrainedModel of its own: `initialize_weights` dispatches its submodules to this method
        super()._init_weights(module)
        if isinstance(module, StructuralAlignmentBias):  # issue 4
            module.reset_parameters()


class SyntaxMTModel(SyntaxMTPreTrainedModel, MarianModel):
    """The bare syntax-aware Marian encoder-decoder (no LM head)."""

    _keys_to_ignore_on_load_missing = MarianModel._keys_to_ignore_on_load_missing

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)  # MarianModel: shared embeddings and their tying
        self.encoder = SyntaxMTEncoder(config)
        self.decoder = SyntaxMTDecoder(config)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values=None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        parent_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        r"""
        parent_positions (`torch.FloatTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Entry t = position (in subword tokens, may be x.5) of the middle of token t's parent word; the root's
            parent is itself; special and padding tokens hold their own position. Required when the config has
            PASCAL heads; ignored when `encoder_outputs` is given.
        """
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                parent_positions=parent_positions,
                **kwargs,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                last_hidden_state=encoder_outputs[0],
                hidden_states=encoder_outputs[1] if len(encoder_outputs) > 1 else None,
                attentions=encoder_outputs[2] if len(encoder_outputs) > 2 else None,
            )
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs[0],
            encoder_attention_mask=attention_mask,
            past_key_values=past_key_values,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            past_key_values=decoder_outputs.past_key_values,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


@dataclass
class SyntaxMTSeq2SeqLMOutput(Seq2SeqLMOutput):
    """`Seq2SeqLMOutput` plus the parts of the loss, for logging.

    Args:
        translation_loss: the cross-entropy (label-smoothed) part of `loss`.
        fertility_loss: the global-fertility negative log-likelihood (before `config.global_fertility_weight`), when
            it is active.
    """

    translation_loss: torch.Tensor | None = None
    fertility_loss: torch.Tensor | None = None


class SyntaxMTForConditionalGeneration(SyntaxMTPreTrainedModel, MarianMTModel, GenerationMixin):
    """Syntax-aware Marian translation model.

    Load a Marian checkpoint with PASCAL heads added (the method adds no parameter)::

        model = SyntaxMTForConditionalGeneration.from_pretrained(marian_dir, encoder_pascal_heads=[8, 0, 0, 0, 0, 0])
    """

    # The Trainer passes `num_items_in_batch` (target tokens over all accumulated micro-batches) and the loss is
    # normalised by it, so gradient accumulation gives exactly the gradient of the full batch.
    accepts_loss_kwargs = True
    _keys_to_ignore_on_load_missing = MarianMTModel._keys_to_ignore_on_load_missing
    _keys_to_ignore_on_save = MarianMTModel._keys_to_ignore_on_save

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)  # MarianMTModel: LM head, final_logits_bias and weight tying
        self.model = SyntaxMTModel(config)
        # issue 4: global fertility (only when weighted), its schedule step, and the auxiliary losses for logging
        self.global_fertility = (
            GlobalFertility(config.d_model, config.alignment_bias_hidden_size) if config.uses_global_fertility else None
        )
        self.alignment_training_step = 0
        self.auxiliary_loss_log = {}
        self.post_init()

    def align(self, input_ids, labels, **kwargs):
        """Source-target alignments from a decoder layer's cross-attention: see `hf_syntax_mt.alignment.align`."""
        from .alignment import align

        return align(self, input_ids, labels, **kwargs)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values=None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        parent_positions: torch.Tensor | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        r"""
        parent_positions (`torch.FloatTensor` of shape `(batch_size, sequence_length)`, *optional*):
            See [`SyntaxMTModel.forward`].
        labels (`torch.LongTensor` of shape `(batch_size, target_length)`, *optional*):
            Target token ids, -100 for ignored positions; the loss uses `config.label_smoothing`.
        num_items_in_batch (`int`, *optional*):
            Number of target tokens in the whole (accumulated) batch; the Trainer passes it. The loss is then the
            summed token loss divided by it instead of the mean over this micro-batch.
        """
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = shift_tokens_right(
                    labels, self.config.pad_token_id, self.config.decoder_start_token_id
                )
        fertility_on = (  # issue 4: global fertility, after `global_fertility_start_step` training steps
            labels is not None
            and self.global_fertility is not None
            and self.alignment_training_step >= self.config.global_fertility_start_step
        )
        with recording_alignment(self, enabled=fertility_on) as alignment:
            outputs = self.model(
                input_ids,
                attention_mask=attention_mask,
                decoder_input_ids=decoder_input_ids,
                encoder_outputs=encoder_outputs,
                decoder_attention_mask=decoder_attention_mask,
                past_key_values=past_key_values,
                inputs_embeds=inputs_embeds,
                decoder_inputs_embeds=decoder_inputs_embeds,
                use_cache=use_cache,
                parent_positions=parent_positions,
                **kwargs,
            )
        logits = self.lm_head(outputs[0]) + self.final_logits_bias  # (B, T, V)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits.view(-1, logits.shape[-1]).float(),
                labels.view(-1).to(logits.device),
                ignore_index=-100,
                label_smoothing=float(self.config.label_smoothing),
                reduction="mean" if num_items_in_batch is None else "sum",
            )
            if num_items_in_batch is not None:
                loss = loss / num_items_in_batch
        translation_loss, fertility_loss = loss, None
        if fertility_on:
            fertility_loss = self.global_fertility.loss(
                alignment.probs, outputs.encoder_last_hidden_state, attention_mask, labels != -100, num_items_in_batch
            )
            loss = loss + self.config.global_fertility_weight * fertility_loss
            log_auxiliary_losses(self, translation_loss=translation_loss, fertility_loss=fertility_loss)
        return SyntaxMTSeq2SeqLMOutput(
            loss=loss,
            translation_loss=translation_loss,
            fertility_loss=fertility_loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )


__all__ = [
    "SyntaxMTAttention",
    "SyntaxMTForConditionalGeneration",
    "SyntaxMTModel",
    "SyntaxMTPreTrainedModel",
    "SyntaxMTSeq2SeqLMOutput",
    "pascal_weights",
]
