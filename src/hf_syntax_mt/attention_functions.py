"""The kernels of method heads as transformers attention functions: the eager hook path (matmul-softmax with each
method's hooks on its heads, the reference) and SDPA with the methods' additive biases folded into its mask, both
registered in transformers' `AttentionInterface` (`ALL_ATTENTION_FUNCTIONS`) under `EAGER_HOOKS` and `SDPA_BIAS`.
`SyntaxMTAttention` picks its functions once, at construction (`modeling_layers`); FlexAttention with PASCAL's
score_mod is the opt-in `hf_syntax_mt.flex`, which registers `FLEX` when imported.

Each takes what every attention function takes (`module, query, key, value, attention_mask, scaling, dropout`), the
mask as the additive float mask `(B|1, 1, T, S)` or None (`additive_mask`), plus the attention's `context`
(`AttentionContext`) and its head `groups`; without them they are a plain eager / SDPA kernel. They return the
attention output `(B, T, h, d)` and the probabilities (eager) or None.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.attention import SDPBackend
from torch.nn.attention.flex_attention import BlockMask, create_mask
from transformers import AttentionInterface

from .compat import sdpa_backends
from .methods.records import HeadRecord

__all__ = ["AUTO_DEVICES", "EAGER_HOOKS", "FLEX", "SDPA_BIAS", "additive_mask", "by_group", "eager_hook_attention"]

#: the names the functions are registered under in transformers' `AttentionInterface`
EAGER_HOOKS = "syntax_mt_eager_hooks"
SDPA_BIAS = "syntax_mt_sdpa_bias"
FLEX = "syntax_mt_flex"  # registered by `hf_syntax_mt.flex` (opt-in)
#: devices where `syntax_attention_kernel="auto"` folds the additive biases into SDPA (on the CPU the eager path is
#: the faster: an alignment bias reads the logits it computes, which SDPA's bias would compute again)
AUTO_DEVICES: tuple[str, ...] = ("cuda",)


def additive_mask(
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


def by_group(x: torch.Tensor, groups, fn, offset: int = 0) -> torch.Tensor:
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


def eager_hook_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    context=None,
    groups=(),
    offset: int = 0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Heads `offset..offset+n-1` of the layer by matmul-softmax with the method hooks of `groups` (method, first and
    stop head in the layer, all inside these heads): `query`/`key`/`value` `(B, n, T|S, d)`, `attention_mask`
    additive `(B|1, 1, T, S)` or None; returns `(B, T, n, d)` and the probabilities `(B, n, T, S)`."""
    ctx = context
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling  # Eq. 1 (PASCAL): Q K^T / sqrt(d), (B, n, T, S)
    scores = by_group(scores, groups, lambda m, x, a, b: m.scores(ctx, x, a, b), offset)
    logits = scores if attention_mask is None else scores + attention_mask  # (B, n, T, S)
    logits = by_group(logits, groups, lambda m, x, a, b: m.logits(ctx, x, a, b), offset)
    probs = nn.functional.softmax(logits, dim=-1)  # (B, n, T, S)
    probs = by_group(probs, groups, lambda m, x, a, b: m.probs(ctx, x, a, b), offset)
    if ctx is not None and ctx.record is not None:
        for method, a, b in groups:
            local = slice(a - offset, b - offset)
            method.record(ctx, HeadRecord(logits[:, local], scores[:, local], probs[:, local]), a, b)
    out = torch.matmul(nn.functional.dropout(probs, p=dropout, training=module.training), value)  # (B, n, T, d)
    return out.transpose(1, 2), probs


def sdpa_bias_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    context=None,
    groups=(),
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """The heads of `query` `(B, h, T, d)` in one SDPA call whose additive mask is `attention_mask + bias`, the bias
    of each fused group (`Method.attention_bias`; `groups`: method, first and stop head among these heads, then in
    the layer) on its heads and 0 on the others; returns `(B, T, h, d)` and None."""
    B, h, T, _ = query.shape
    S = key.shape[2]
    parts, pos = [], 0
    for m, a, b, start, stop in groups:
        if a > pos:
            parts.append(query.new_zeros(B, a - pos, T, S))
        parts.append(m.attention_bias(context, query[:, a:b], key[:, a:b], start, stop))  # (B, b-a, T, S)
        pos = b
    if pos < h and parts:
        parts.append(query.new_zeros(B, h - pos, T, S))
    bias = (torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]) if parts else None  # (B, h, T, S)
    attn_mask = attention_mask if bias is None else bias if attention_mask is None else bias + attention_mask
    attn_mask = None if attn_mask is None else attn_mask.to(query.dtype)  # (B, h|1, T, S)
    # CUDA's fused kernels need rows 16-byte aligned (the op would copy the mask; compiled, it fails)
    if attn_mask is not None and S % 8 and query.device.type == "cuda":
        attn_mask = nn.functional.pad(attn_mask, (0, 8 - S % 8))[..., :S]  # (B, h, T, S) view of (B, h, T, S8)
    # cuDNN's SDPA returns no gradient for the mask and misreads some masks on H100 (pytorch #191612, #196678):
    # on CUDA the memory-efficient kernel (which takes an arbitrary bias, with its gradient), else the math one
    backends = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH] if query.device.type == "cuda" else None
    with sdpa_backends(backends):
        out = nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout, scale=scaling
        )  # (B, h, T, d)
    return out.transpose(1, 2), None  # (B, T, h, d)


AttentionInterface.register(EAGER_HOOKS, eager_hook_attention)
AttentionInterface.register(SDPA_BIAS, sdpa_bias_attention)
