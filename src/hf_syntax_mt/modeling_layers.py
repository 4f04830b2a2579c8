"""The layers of the syntax-aware Marian spine: `SyntaxMTAttention` (Marian attention with the registry's hook
points), and the encoder and decoder layers (with the sublayers methods add, e.g. document context).
`modeling_syntax_mt` assembles them into the encoder, decoder and models."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.attention import SDPBackend
from torch.nn.attention.flex_attention import BlockMask, create_mask
from transformers.cache_utils import EncoderDecoderCache
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.marian.modeling_marian import (
    MarianAttention,
    MarianDecoderLayer,
    MarianEncoderLayer,
    eager_attention_forward,
)

from . import fused_kernels
from .compat import sdpa_backends
from .configuration_syntax_mt import SyntaxMTConfig
from .errors import UserError
from .methods.base import Method
from .methods.records import AttentionContext, AttentionRecord, HeadRecord
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


def _additive_mask(
    attention_mask: torch.Tensor | BlockMask | None,
    query_length: int,
    key_length: int,
    is_causal: bool,
    dtype,
    device,
) -> torch.Tensor | None:
    """Turn any mask the attention interface may receive into the additive float mask `(B|1, 1, T, S)` the method
    hooks read (0: attend, the dtype's minimum: masked), or None when nothing is masked.

    What transformers' mask functions (`ALL_MASK_ATTENTION_FUNCTIONS`) give each implementation: eager, an additive
    float mask `(B, 1, T, S)`, returned as it is; sdpa, a boolean one (True = attend) or None (no padding;
    causality via `is_causal`); flex_attention, a `BlockMask`, whose `mask_mod` is evaluated on every (query, key)
    pair; flash_attention_*, a `(B, S)` key mask (1 = attend, the last S positions of a longer one are the keys) or
    None, with causality via `is_causal`.
    """
    min_value = torch.finfo(dtype).min
    if isinstance(attention_mask, BlockMask):  # flex_attention: (B|1, H|1, T, S) as a mask_mod, causality included
        allowed = create_mask(attention_mask.mask_mod, attention_mask.shape[0], 1, query_length, key_length, device)
        return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, min_value)
    causal = None
    if is_causal and query_length > 1:
        # causal with an offset: query t (of T, the last T of S positions) sees keys 0..S-T+t
        q = torch.arange(query_length, device=device).view(-1, 1) + (key_length - query_length)
        k = torch.arange(key_length, device=device).view(1, -1)
        causal = (k <= q).view(1, 1, query_length, key_length)  # (1, 1, T, S)
    if attention_mask is not None and attention_mask.dim() == 2:  # flash_attention_*: (B, S') key padding
        allowed = attention_mask[:, -key_length:].bool().view(-1, 1, 1, key_length)  # (B, 1, 1, S)
        allowed = allowed if causal is None else allowed & causal  # (B, 1, 1|T, S)
    elif attention_mask is None:
        if causal is None:
            return None
        allowed = causal
    elif attention_mask.dtype == torch.bool:  # sdpa
        allowed = attention_mask
    else:  # eager: already additive
        return attention_mask.to(dtype)
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, min_value)


def _by_group(x: torch.Tensor, groups, fn, offset: int = 0) -> torch.Tensor:
    """Apply `fn(method, x[:, start - offset:stop - offset], start, stop)` to each head group of `x` `(B, H, ...)`,
    whose first head is head `offset` of the layer; unchanged groups keep their slice, and `x` itself comes back when
    no group changed."""
    parts, pos, changed = [], 0, False
    for method, start, stop in groups:
        a, b = start - offset, stop - offset
        part = x[:, a:b]
        new = fn(method, part, start, stop)
        changed |= new is not part
        parts.extend([x[:, pos:a], new])
        pos = b
    if not changed:
        return x
    parts.append(x[:, pos:])
    return torch.cat([p for p in parts if p.shape[1]], dim=1)


def _without(x: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """`x` `(B, H, ...)` without heads `start..stop-1`."""
    if start == stop:
        return x
    return x[:, stop:] if start == 0 else torch.cat([x[:, :start], x[:, stop:]], dim=1)


class SyntaxMTAttention(MarianAttention):
    """Marian multi-head attention whose heads the registered methods may take (`head_groups`, in registry order,
    `methods/builtin.py`, then the plain heads).

    One call runs at most two kernels. Heads whose probabilities are read (a loss's record, `output_attentions`) or
    whose method changes scores or probabilities without a fused form that runs here take the eager score path, where
    each method's hooks transform its own heads; they are one span of heads, from the first such group to the last.
    The others run in one kernel: FlexAttention with the fused groups' `score_mod` (PASCAL, where it compiles), else
    SDPA with the fused groups' additive biases (alignment biases, tree bias; zeros for the other heads) folded into
    its mask, else the configured kernel (`config._attn_implementation`). `config.syntax_attention_kernel="eager"`
    keeps every method head on the eager path, the reference (tests/models/test_fused_attention.py). With no method
    head this is exactly `MarianAttention`, except that `output_attentions=True` returns the probabilities of every
    head whatever the kernel.

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
        mask = _additive_mask(attention_mask, query.shape[2], key.shape[2], causal, query.dtype, query.device)
        ctx = AttentionContext(self, self.site, mask, past_key_values, method_inputs or {}, attention_record)
        dropout = self.dropout if self.training else 0.0
        query = _by_group(query, self.head_groups, lambda m, q, a, b: m.query(ctx, q, a, b))  # (B, H, T, d)
        # heads e0..e1-1 take the eager score path: every head when probabilities are read, else from the first to the
        # last group that needs it in this call (hooks that change its scores or probabilities and no fused form that
        # runs here, or a loss that reads them); the others run in one kernel (`_kernel`)
        forms = () if read_all else self._fused_forms(query, key, dropout)
        eager = [(a, b) for m, a, b in self.head_groups if m.fused not in forms and m.needs_eager(ctx)]
        e0, e1 = (0, H) if read_all else (min(a for a, _ in eager), max(b for _, b in eager)) if eager else (0, 0)
        out_eager = probs = out_rest = None
        if e1 > e0:
            out_eager, probs = self._eager(ctx, query[:, e0:e1], key[:, e0:e1], value[:, e0:e1], dropout, e0)
            if record_cross:
                attention_record.cross[self.layer_idx] = probs  # (B, H, T, S)
        if e1 - e0 < H:
            n = e1 - e0  # the fused groups outside the eager heads, with their first and stop head among the others
            rest = [
                (m, a - n * (a >= e1), b - n * (a >= e1), a, b)
                for m, a, b in self.head_groups
                if m.fused in forms and (b <= e0 or a >= e1)
            ]
            q, k, v = _without(query, e0, e1), _without(key, e0, e1), _without(value, e0, e1)  # (B, H-n, T|S, d)
            out_rest = self._kernel(ctx, q, k, v, rest, attention_mask, causal, dropout, kwargs)  # (B, T, H-n, d)
            if out_rest is None:  # FlexAttention could not run: every head on the eager path, the reference
                out_eager, probs = self._eager(ctx, query, key, value, dropout)
        if out_rest is None:
            attn_output = out_eager  # (B, T, H, d)
        elif out_eager is None:
            attn_output = out_rest
        else:  # the eager heads back in their place
            parts = [out_rest[:, :, :e0], out_eager, out_rest[:, :, e0:]]
            attn_output = torch.cat([p for p in parts if p.shape[2]], dim=2)  # (B, T, H, d)
        attn_output = self.out_proj(attn_output.reshape(*input_shape, -1).contiguous())  # (B, T, D)
        return attn_output, (probs if output_attentions else None)  # (B, H, T, S)

    def _fused_forms(self, query, key, dropout: float) -> tuple[str, ...]:
        """The fused forms (`Method.fused`) that run in this call: none under `syntax_attention_kernel="eager"`, or
        `"auto"` on the CPU (where the eager path is the faster: an alignment bias reads the logits it computes, which
        SDPA's bias would compute again). Otherwise `"bias"`, an additive bias folded into SDPA's mask, and
        `"score_mod"` (FlexAttention) under `"fused"`, or `"auto"` in training (evaluation and `generate` take the
        eager path, which compiles nothing and stores nothing for a backward; docs/gpu.md, "What stays compiled"),
        where no head of the attention has an additive bias (FlexAttention takes none), without attention dropout and
        where `fused_kernels.can_run` (a gradient only where flex is compiled; the CPU has no flex backward)."""
        setting, device = self.config.syntax_attention_kernel, query.device
        if setting == "eager" or (setting == "auto" and device.type not in fused_kernels.COMPILED_DEVICES):
            return ()
        needs_grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad)
        sizes = (query.shape[0], self.num_heads, query.shape[2], key.shape[2])  # (B, H, T, S)
        flex = (
            (setting == "fused" or needs_grad)
            and dropout == 0.0
            and all(m.fused != "bias" for m, _, _ in self.head_groups)
            and fused_kernels.can_run(device, self.head_dim, query.dtype, needs_grad, sizes)
        )
        return ("bias", "score_mod") if flex else ("bias",)

    def _kernel(self, ctx: AttentionContext, query, key, value, groups, attention_mask, causal, dropout, kwargs):
        """The heads of `query` `(B, h, T, d)` in one kernel: FlexAttention with the score_mods of `groups` (fused
        groups: method, first and stop head among these heads, then in the layer) when one has a score_mod, else SDPA
        with their additive biases, else the configured kernel (no method changes these heads). `(B, T, h, d)`, or
        None where FlexAttention failed or did not run compiled."""
        kinds = {m.fused for m, *_ in groups}
        if "score_mod" in kinds:
            try:
                return self._flex(ctx, query, key, value, groups, attention_mask, causal)
            except Exception as error:  # noqa: BLE001 - a kernel that cannot run here must not stop the run
                if fused_kernels.limit_reached(error):  # dynamo's recompile limit, or dynamo disabled
                    fused_kernels.warn_not_compiled()
                else:  # e.g. it cannot compile here: not tried again for this device, head dim and dtype
                    fused_kernels.failed(error, query.device, self.head_dim, query.dtype)
                return None
        if "bias" in kinds:
            return self._sdpa_bias(ctx, query, key, value, groups, dropout)
        interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        # `attention_mask` as transformers made it for this kernel, `kwargs` as transformers passes them
        return interface(self, query, key, value, attention_mask, dropout=dropout, scaling=self.scaling, **kwargs)[0]

    def _eager(self, ctx: AttentionContext, query, key, value, dropout, offset: int = 0):
        """Heads `offset..offset+n-1` by matmul-softmax with the method hooks: `query`/`key`/`value`
        `(B, n, T|S, d)`; returns `(B, T, n, d)` and probabilities `(B, n, T, S)`."""
        n = query.shape[1]
        groups = [g for g in self.head_groups if g[1] >= offset and g[2] <= offset + n]
        scores = (
            torch.matmul(query, key.transpose(2, 3)) * self.scaling
        )  # Eq. 1 (PASCAL): Q K^T / sqrt(d), (B, n, T, S)
        scores = _by_group(scores, groups, lambda m, x, a, b: m.scores(ctx, x, a, b), offset)
        logits = scores if ctx.mask is None else scores + ctx.mask  # (B, n, T, S)
        logits = _by_group(logits, groups, lambda m, x, a, b: m.logits(ctx, x, a, b), offset)
        probs = nn.functional.softmax(logits, dim=-1)  # (B, n, T, S)
        probs = _by_group(probs, groups, lambda m, x, a, b: m.probs(ctx, x, a, b), offset)
        if ctx.record is not None:
            for method, a, b in groups:
                local = slice(a - offset, b - offset)
                method.record(ctx, HeadRecord(logits[:, local], scores[:, local], probs[:, local]), a, b)
        out = torch.matmul(nn.functional.dropout(probs, p=dropout, training=self.training), value)  # (B, n, T, d)
        return out.transpose(1, 2), probs

    def _flex(self, ctx: AttentionContext, query, key, value, groups, attention_mask, causal: bool) -> torch.Tensor:
        """The heads of `query` `(B, h, T, d)` in one FlexAttention call (`fused_kernels.flex`) whose score_mod applies
        each fused group's `score_mod` to its heads (`groups`: (method, first, stop) in these heads, then in the
        layer), padding given as `(B, S)` key-valid (read from the additive mask, whatever format the configured
        kernel's mask had) and causality by position; returns `(B, T, h, d)`."""
        mods = [m.score_mod(ctx, start, stop) for m, a, b, start, stop in groups]
        B, h, T, _ = query.shape
        group, rank = self._flex_heads(tuple((a, b) for _, a, b, _, _ in groups), h, query.device)
        # eager's and sdpa's own masks as before (None without padding: one graph fewer); a BlockMask or flash's
        # (B, S) read through the normalised additive mask
        plain = attention_mask is None or (torch.is_tensor(attention_mask) and attention_mask.dim() == 4)
        valid = fused_kernels.key_valid(attention_mask if plain else ctx.mask, B, key.shape[2], query.device)  # (B, S)
        out = fused_kernels.flex(query, key, value, mods, group, rank, valid, causal, self.scaling)  # (B, h, T, d)
        return out.transpose(1, 2)  # (B, T, h, d)

    def _flex_heads(self, spans: tuple, h: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """`(h,)` long tensors for `spans` ((first, stop) per fused group): each head's group (-1: none) and its index
        in the group; data, so that every layer shares one compiled graph. Built once per layout and device."""
        cache = self.__dict__.setdefault("_flex_heads_cache", {})
        key = (spans, h, str(device))
        if key not in cache:
            group, rank = torch.full((h,), -1, dtype=torch.long), torch.zeros(h, dtype=torch.long)
            for g, (a, b) in enumerate(spans):
                group[a:b], rank[a:b] = g, torch.arange(b - a)
            cache[key] = (group.to(device), rank.to(device))
        return cache[key]

    def _sdpa_bias(self, ctx: AttentionContext, query, key, value, groups, dropout) -> torch.Tensor:
        """The heads of `query` `(B, h, T, d)` in one SDPA call whose additive mask is `mask + bias`, the bias of
        each fused group (`attention_bias`) on its heads and 0 on the others; returns `(B, T, h, d)`."""
        B, h, T, _ = query.shape
        S = key.shape[2]
        parts, pos = [], 0
        for m, a, b, start, stop in groups:
            if a > pos:
                parts.append(query.new_zeros(B, a - pos, T, S))
            parts.append(m.attention_bias(ctx, query[:, a:b], key[:, a:b], start, stop))  # (B, b-a, T, S)
            pos = b
        if pos < h:
            parts.append(query.new_zeros(B, h - pos, T, S))
        bias = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]  # (B, h, T, S)
        attn_mask = (bias if ctx.mask is None else bias + ctx.mask).to(query.dtype)  # (B, h, T, S)
        # CUDA's fused kernels need rows 16-byte aligned (the op would copy the mask; compiled, it fails)
        if S % 8 and query.device.type == "cuda":
            attn_mask = nn.functional.pad(attn_mask, (0, 8 - S % 8))[..., :S]  # (B, h, T, S) view of (B, h, T, S8)
        # cuDNN's SDPA returns no gradient for the mask and misreads some masks on H100 (pytorch #191612, #196678):
        # on CUDA the memory-efficient kernel (which takes an arbitrary bias, with its gradient), else the math one
        backends = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH] if query.device.type == "cuda" else None
        with sdpa_backends(backends):
            out = nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=attn_mask, dropout_p=dropout, scale=self.scaling
            )  # (B, h, T, d)
        return out.transpose(1, 2)  # (B, T, h, d)


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
