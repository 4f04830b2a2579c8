"""The layers of the syntax-aware Marian spine: `SyntaxMTAttention` (Marian attention with the registry's hook
points), and the encoder and decoder layers (with the sublayers methods add, e.g. document context).
`modeling_syntax_mt` assembles them into the encoder, decoder and models."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn
from transformers.cache_utils import EncoderDecoderCache
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.marian.modeling_marian import (
    MarianAttention,
    MarianDecoderLayer,
    MarianEncoderLayer,
    eager_attention_forward,
)

from .attention_functions import AUTO_DEVICES, EAGER_HOOKS, FLEX, SDPA_BIAS, additive_mask, by_group
from .configuration_syntax_mt import SyntaxMTConfig
from .errors import UserError
from .methods.base import Method
from .methods.records import AttentionContext, AttentionRecord
from .methods.registry import head_layout, registered

# transformers 5.24 renamed the decoding cache from `past_key_values` to `cache` (argument and output field; the old
# name is deprecated until 5.40). The spine passes and reads it under the installed name and accepts either.
CACHE = "cache" if "cache" in inspect.signature(MarianAttention.forward).parameters else "past_key_values"


def pop_cache(past_key_values, kwargs: dict):
    """The decoding cache, given as `past_key_values` or as `cache` in `kwargs` (popped from them), under any
    transformers 5.x."""
    cache = kwargs.pop("cache", None)
    if cache is not None and past_key_values is not None:
        raise UserError("Both `cache` and `past_key_values` were given: pass the decoding cache under one name only.")
    return past_key_values if cache is None else cache


def _without(x: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """`x` `(B, H, ...)` without heads `start..stop-1`."""
    if start == stop:
        return x
    return x[:, stop:] if start == 0 else torch.cat([x[:, :start], x[:, stop:]], dim=1)


class _Plan(NamedTuple):
    """Which heads of an attention take which kernel in a call: heads `e0..e1-1` the eager hook path, with the hook
    groups `eager` ((method, first, stop) in the layer); the other heads one kernel, the fused one with the groups
    `fused` ((method, first, stop) among those heads, then in the layer) when there are any, else the configured
    kernel."""

    e0: int
    e1: int
    eager: tuple
    fused: tuple


def _dispatch_plans(groups: list, num_heads: int, form: str | None) -> dict[tuple[bool, tuple[bool, ...]], _Plan]:
    """Every plan an attention with head `groups` and fused form `form` can take, by (whether the fused form runs,
    whether each group needs the eager path): the eager heads are one span, from the first such group to the last (a
    group inside it runs its hooks there), and a fused group outside it keeps its form."""
    plans = {}
    for fused_runs in (False, True) if form else (False,):
        for flags in itertools.product((False, True), repeat=len(groups)):
            eager = [(a, b) for (_, a, b), flag in zip(groups, flags, strict=True) if flag]
            e0, e1 = (min(a for a, _ in eager), max(b for _, b in eager)) if eager else (0, 0)
            n = e1 - e0  # the fused groups outside the eager heads shift down by n past the span
            inside = tuple(g for g in groups if n and g[1] >= e0 and g[2] <= e1)
            fused = tuple(
                (m, a - n * (a >= e1), b - n * (a >= e1), a, b)
                for m, a, b in groups
                if fused_runs and m.fused == form and (b <= e0 or a >= e1)
            )
            plans[fused_runs, flags] = _Plan(e0, e1, inside, fused)
    return plans


class SyntaxMTAttention(MarianAttention):
    """Marian multi-head attention whose heads the registered methods may take (`head_groups`, in registry order,
    `methods/builtin.py`, then the plain heads).

    One call runs at most two kernels, transformers attention functions chosen at construction: the eager hook path
    (`attention_functions.EAGER_HOOKS`) for the heads whose probabilities are read (a loss's record,
    `output_attentions`) or whose method changes scores or probabilities without a fused form that runs in this call,
    where each method's hooks transform its own heads; and, for the others, the layer's fused kernel for its fused
    groups (`fused_kernel`: SDPA with the additive biases of the alignment biases and the tree bias folded into its
    mask, zeros for the other heads, `attention_functions.SDPA_BIAS`; or, where a layer's fused groups are all
    score_mods and `hf_syntax_mt.flex` was imported before the model was built, FlexAttention with PASCAL's
    score_mod), else the configured kernel (`config._attn_implementation`, as Marian calls it). Which heads take which
    kernel in a call is one of the plans made at construction (`_dispatch_plans`), chosen by whether the fused kernel
    runs (`syntax_attention_kernel`, device, gradient) and which groups need the eager path: the eager heads are one
    span, from the first such group to the last. `config.syntax_attention_kernel="eager"` keeps every method head on
    the eager path, the reference (tests/models/test_fused_attention.py). With no method head this is exactly
    `MarianAttention`, except that `output_attentions=True` returns the probabilities of every head whatever the
    kernel.

    `site`: `"encoder"` (encoder self-attention), `"decoder"` (decoder self-attention) or `"cross"`.
    """

    def __init__(self, *args, site: str = "encoder", **kwargs):
        super().__init__(*args, **kwargs)
        for proj, gain in (
            (self.q_proj, 2**-0.5),
            (self.k_proj, 2**-0.5),
            (self.v_proj, 2**-0.5),
            (self.out_proj, 1.0),
        ):
            proj.xavier_gain = gain  # used by attention_init="xavier" (_init_weights)
        self.site = site
        groups = head_layout(self.config, site, self.layer_idx, self.num_heads) if self.config is not None else []
        self.head_groups: list[tuple[Method, int, int]] = groups
        taken = {method.name: stop - start for method, start, stop in groups}
        for method in registered() if self.config is not None else []:  # every method, with its heads here (maybe 0)
            method.build_attention(self, self.config, site, self.layer_idx, taken.get(method.name, 0))
        # the kernels, once: FlexAttention takes no additive bias, so a layer with a bias group runs its score_mod
        # groups eager; without the opt-in flex module they are eager everywhere
        forms, form = {m.fused for m, _, _ in groups}, None
        if "bias" in forms:
            form, kernel = "bias", SDPA_BIAS
        elif "score_mod" in forms and FLEX in ALL_ATTENTION_FUNCTIONS:
            form, kernel = "score_mod", FLEX
        self.fused_form: str | None = form
        self.fused_kernel: Callable | None = ALL_ATTENTION_FUNCTIONS[kernel] if form else None
        self.eager_kernel: Callable = ALL_ATTENTION_FUNCTIONS[EAGER_HOOKS]
        self._plans = _dispatch_plans(groups, self.num_heads, form)
        self._read_all = _Plan(0, self.num_heads, tuple(groups), ())  # every head's probabilities are read

    def heads_of(self, name: str) -> range:
        """The head indices that method `name` takes in this attention (empty when none)."""
        return next((range(a, b) for m, a, b in self.head_groups if m.name == name), range(0))

    def _project(self, hidden_states, key_value_states, past_key_values, kwargs: dict):
        """q, k, v `(B, H, T|S, d)` with Marian's cache handling (self- and cross-attention).

        Copied from `transformers.models.marian.modeling_marian.MarianAttention.forward` (5.24), its projection and
        cache update up to the attention kernel, which this class replaces for method heads;
        `tests/models/test_transformers_compat.py` compares it with the installed transformers' (uncached, cached
        self-attention and reused cross-attention keys)."""
        is_cross_attention = key_value_states is not None
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)  # (B, H, T, d)
        cache, is_updated = past_key_values, False
        if isinstance(past_key_values, EncoderDecoderCache):
            is_updated = past_key_values.is_updated.get(self.layer_idx)
            cache = (
                past_key_values.cross_attention_cache if is_cross_attention else past_key_values.self_attention_cache
            )
        if is_cross_attention and past_key_values is not None and is_updated:
            return query, cache.layers[self.layer_idx].keys, cache.layers[self.layer_idx].values
        current = key_value_states if is_cross_attention else hidden_states
        kv_shape = (*current.shape[:-1], -1, self.head_dim)
        key = self.k_proj(current).view(kv_shape).transpose(1, 2)  # (B, H, S, d)
        value = self.v_proj(current).view(kv_shape).transpose(1, 2)  # (B, H, S, d)
        if past_key_values is not None:
            key, value = cache.update(key, value, self.layer_idx, kwargs=kwargs)
            if is_cross_attention and isinstance(past_key_values, EncoderDecoderCache):
                past_key_values.is_updated[self.layer_idx] = True
        return query, key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values=None,
        attention_mask: torch.Tensor | None = None,
        attention_record: AttentionRecord | None = None,
        method_inputs: dict | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`hidden_states` `(B, T, D)`; `method_inputs`: what the methods' hooks read (`Method.prepare`, e.g.
        `parent_positions` `(B, S)`, `tree_weights` `(B, T, S)`), kept apart from `kwargs`, which go to the configured
        kernel as transformers passes them (a method tensor never reaches it)."""
        past_key_values = pop_cache(past_key_values, kwargs)
        output_attentions = kwargs.get("output_attentions", False)
        record_cross = (
            attention_record is not None and self.site == "cross" and attention_record.wants_cross(self.layer_idx)
        )
        read_all = output_attentions or record_cross  # every head's probabilities are wanted
        if not self.head_groups and not read_all:
            return super().forward(hidden_states, key_value_states, past_key_values, attention_mask, **kwargs)

        if self.config._attn_implementation not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
            raise UserError(
                f"attn_implementation={self.config._attn_implementation!r} has no mask function, so transformers "
                "gives its attention no mask and this model's method heads (or returned attention probabilities) "
                "would attend to padding: use 'eager', 'sdpa', 'flex_attention' or 'flash_attention_2', or register "
                "the mask format the kernel takes (transformers.AttentionMaskInterface.register(name, sdpa_mask))."
            )
        input_shape, H = hidden_states.shape[:-1], self.num_heads  # (B, T)
        query, key, value = self._project(hidden_states, key_value_states, past_key_values, kwargs)  # (B, H, T|S, d)
        causal = self.is_causal and key_value_states is None
        mask = additive_mask(attention_mask, query.shape[2], key.shape[2], causal, query.dtype, query.device)
        ctx = AttentionContext(self, self.site, mask, past_key_values, method_inputs or {}, attention_record)
        dropout = self.dropout if self.training else 0.0
        query = by_group(query, self.head_groups, lambda m, q, a, b: m.query(ctx, q, a, b))  # (B, H, T, d)
        if read_all:
            plan = self._read_all
        else:  # a group needs the eager path when its hooks change its scores or probabilities (and its fused form
            # does not run in this call) or a loss reads them
            fused = self._fused_runs(query, key, dropout)
            flags = tuple(
                not (fused and m.fused == self.fused_form) and m.needs_eager(ctx) for m, _, _ in self.head_groups
            )
            plan = self._plans[fused, flags]
        e0, e1 = plan.e0, plan.e1
        out_eager = probs = out_rest = None
        if e1 > e0:
            out_eager, probs = self._eager(
                ctx, query[:, e0:e1], key[:, e0:e1], value[:, e0:e1], dropout, e0, plan.eager
            )
            if record_cross:
                attention_record.cross[self.layer_idx] = probs  # (B, H, T, S)
        if e1 - e0 < H:
            q, k, v = _without(query, e0, e1), _without(key, e0, e1), _without(value, e0, e1)  # (B, H-n, T|S, d)
            out_rest = self._kernel(
                ctx, q, k, v, plan.fused, attention_mask, causal, dropout, kwargs
            )  # (B, T, H-n, d)
            if out_rest is None:  # FlexAttention could not run: every head on the eager path, the reference
                out_eager, probs = self._eager(ctx, query, key, value, dropout, 0, self._read_all.eager)
        if out_rest is None:
            attn_output = out_eager  # (B, T, H, d)
        elif out_eager is None:
            attn_output = out_rest
        else:  # the eager heads back in their place
            parts = [out_rest[:, :, :e0], out_eager, out_rest[:, :, e0:]]
            attn_output = torch.cat([p for p in parts if p.shape[2]], dim=2)  # (B, T, H, d)
        attn_output = self.out_proj(attn_output.reshape(*input_shape, -1).contiguous())  # (B, T, D)
        return attn_output, (probs if output_attentions else None)  # (B, H, T, S)

    def _fused_runs(self, query, key, dropout: float) -> bool:
        """Whether the layer's fused kernel runs in this call: never under `syntax_attention_kernel="eager"`. SDPA
        with the additive biases under `"fused"`, or `"auto"` on CUDA (on the CPU the eager path is the faster: an
        alignment bias reads the logits it computes, which SDPA's bias would compute again). FlexAttention under
        `"fused"`, or `"auto"` in training where it runs compiled (evaluation and `generate` take the eager path, which
        compiles nothing and stores nothing for a backward; docs/gpu.md, "What stays compiled"), without attention
        dropout and where `flex.can_run` (a gradient only where flex is compiled; the CPU has no flex backward)."""
        setting, device = self.config.syntax_attention_kernel, query.device
        if self.fused_form is None or setting == "eager":
            return False
        if self.fused_form == "bias":
            return setting == "fused" or device.type in AUTO_DEVICES
        flex = self.fused_kernel
        if setting == "auto" and not flex.compiled_on(device):
            return False
        needs_grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad)
        sizes = (query.shape[0], self.num_heads, query.shape[2], key.shape[2])  # (B, H, T, S)
        return (
            (setting == "fused" or needs_grad)
            and dropout == 0.0
            and flex.can_run(device, self.head_dim, query.dtype, needs_grad, sizes)
        )

    def _kernel(self, ctx: AttentionContext, query, key, value, groups, attention_mask, causal, dropout, kwargs):
        """The heads of `query` `(B, h, T, d)` in one kernel: the layer's fused kernel with `groups` (fused groups:
        method, first and stop head among these heads, then in the layer) when there are any, else the configured
        kernel (no method changes these heads). `(B, T, h, d)`, or None where FlexAttention did not run."""
        if groups and self.fused_form == "bias":
            return self._sdpa_bias(ctx, query, key, value, groups, dropout)
        if groups:
            return self._flex(ctx, query, key, value, groups, attention_mask, causal)
        interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        # `attention_mask` as transformers made it for this kernel, `kwargs` as transformers passes them
        return interface(self, query, key, value, attention_mask, dropout=dropout, scaling=self.scaling, **kwargs)[0]

    def _eager(self, ctx: AttentionContext, query, key, value, dropout, offset: int = 0, groups=()):
        """Heads `offset..offset+n-1` on the eager hook path with the hook `groups` among them: `query`/`key`/`value`
        `(B, n, T|S, d)`; returns `(B, T, n, d)` and probabilities `(B, n, T, S)`."""
        return self.eager_kernel(
            self, query, key, value, ctx.mask, scaling=self.scaling, dropout=dropout, context=ctx, groups=groups,
            offset=offset,
        )  # fmt: skip

    def _sdpa_bias(self, ctx: AttentionContext, query, key, value, groups, dropout) -> torch.Tensor:
        """The heads of `query` `(B, h, T, d)` in SDPA with the additive biases of `groups` folded into its mask;
        `(B, T, h, d)`."""
        return self.fused_kernel(
            self, query, key, value, ctx.mask, scaling=self.scaling, dropout=dropout, context=ctx, groups=groups
        )[0]

    def _flex(self, ctx: AttentionContext, query, key, value, groups, attention_mask, causal: bool):
        """The heads of `query` `(B, h, T, d)` in FlexAttention with the score_mods of `groups` (`hf_syntax_mt.flex`);
        `(B, T, h, d)`, or None where it did not run."""
        return self.fused_kernel(
            self, query, key, value, attention_mask, scaling=self.scaling, context=ctx, groups=groups, causal=causal
        )[0]


def _sublayers(layer: nn.Module, config, side: str, layer_idx: int) -> list[Method]:
    """Let every registered method add its sublayer to `layer` (`Method.build_layer`); the active methods that
    have one (they override `Method.sublayer`) run it after the self-attention block."""
    for method in registered():
        method.build_layer(layer, config, side, layer_idx)
    return [m for m in registered() if type(m).sublayer is not Method.sublayer and m.active(config)]


class SyntaxMTEncoderLayer(MarianEncoderLayer):
    """Marian encoder layer whose self-attention may have method heads, and the sublayers methods add between
    self-attention and the feed-forward network (document context: a context attention, Eq. 12)."""

    def __init__(self, config: SyntaxMTConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        self.self_attn = SyntaxMTAttention(
            embed_dim=self.embed_dim, num_heads=config.encoder_attention_heads, dropout=config.attention_dropout,
            config=config, layer_idx=layer_idx, site="encoder",
        )  # fmt: skip
        self.sublayer_methods = _sublayers(self, config, "encoder", layer_idx)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        layer_states: dict | None = None,
        method_inputs: dict | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """`MarianEncoderLayer.forward` with the methods' inputs given to the self-attention (`method_inputs`, what
        their hooks read) and their sublayers after it (document context: Eq. 12); `layer_states`: what the sublayers
        read (`Method.encoder_states`, e.g. the document context's keys and values)."""
        # Copied from transformers.models.marian.modeling_marian.MarianEncoderLayer.forward, with `method_inputs` and
        # the sublayer loop added (tests/models/test_upstream_copies.py compares it with the installed release)
        residual = hidden_states
        hidden_states, _ = self.self_attn(
            hidden_states,
            attention_mask=attention_mask,
            method_inputs=method_inputs,
            **kwargs,
        )
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = residual + hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)  # B^(n), Eq. 11

        for method in self.sublayer_methods if layer_states else ():
            hidden_states = method.sublayer(self, hidden_states, layer_states)  # e.g. D^(n), Eq. 12

        residual = hidden_states  # Eq. 13
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        hidden_states = self.fc2(hidden_states)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = residual + hidden_states
        hidden_states = self.final_layer_norm(hidden_states)

        if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)

        return hidden_states


class SyntaxMTDecoderLayer(MarianDecoderLayer):
    """Marian decoder layer: self-attention (causal) and cross-attention whose heads methods may take, and the
    sublayers methods add after the self-attention (document context: a context attention, Eq. 16)."""

    def __init__(self, config: SyntaxMTConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        common = dict(dropout=config.attention_dropout, is_decoder=True, config=config, layer_idx=layer_idx)
        self.self_attn = SyntaxMTAttention(
            self.embed_dim, config.decoder_attention_heads, is_causal=True, site="decoder", **common
        )
        self.encoder_attn = SyntaxMTAttention(self.embed_dim, config.decoder_attention_heads, site="cross", **common)
        self.sublayer_methods = _sublayers(self, config, "decoder", layer_idx)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values=None,
        use_cache: bool | None = True,
        layer_states: dict | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """`MarianDecoderLayer.forward` with the methods' sublayers after the self-attention (document context: Eq.
        16). `layer_states`: what they read (`Method.decoder_states`, e.g. the keys/values of every decoder context
        sublayer)."""
        past_key_values = pop_cache(past_key_values, kwargs)
        # Copied from transformers.models.marian.modeling_marian.MarianDecoderLayer.forward, with the sublayer loop
        # added and the cache under the name `past_key_values` (tests/models/test_upstream_copies.py compares it with
        # the installed release)
        residual = hidden_states

        # Self Attention
        hidden_states, _ = self.self_attn(
            hidden_states,
            past_key_values=past_key_values,
            attention_mask=attention_mask,
            **kwargs,
        )
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = residual + hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)  # E^(n), Eq. 15

        for method in self.sublayer_methods if layer_states else ():
            hidden_states = method.sublayer(self, hidden_states, layer_states)  # e.g. F^(n), Eq. 16

        # Cross-Attention Block
        if encoder_hidden_states is not None:  # Eq. 17
            residual = hidden_states

            hidden_states, _ = self.encoder_attn(
                hidden_states,
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                past_key_values=past_key_values,
                **kwargs,
            )
            hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
            hidden_states = residual + hidden_states
            hidden_states = self.encoder_attn_layer_norm(hidden_states)

        # Fully Connected
        residual = hidden_states  # Eq. 18
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        hidden_states = self.fc2(hidden_states)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = residual + hidden_states
        hidden_states = self.final_layer_norm(hidden_states)

        return hidden_states
