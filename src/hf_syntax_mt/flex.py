"""FlexAttention for score_mod methods (PASCAL), opt-in: `import hf_syntax_mt.flex` registers its attention function
(`attention_functions.FLEX`) in transformers' `AttentionInterface`, and attention modules built after that run their
score_mod heads in it where `syntax_attention_kernel` allows (`"fused"`, or `"auto"` in training on a device where it
runs compiled, `COMPILED_DEVICES`). Without the import the package never compiles anything nor touches dynamo's or
the shape environment's settings: score_mod heads take the eager path, the reference, which gives the same values.

The kernel is compiled once with dynamic shapes. Why it is built this way: dynamo keeps at most
`torch._dynamo.config.recompile_limit` (8) compiled graphs per function and every Python constant a compiled function
reads, and every global state it runs under, is a guard. So the one compiled function here (`_compiled_body`, not
`flex_attention` itself, whose cache transformers' own flex path shares) reads only tensors: the methods' score_mods
capture tensors (parent positions, sigma, the rows parent ignoring drops), the heads each score_mod applies to are an
`(h,)` tensor, padding is a `(B, S)` key-valid tensor (never `None`, never a `(B, 1, T, S)` mask), and the batch, head
and length dimensions are dynamic. What is left to guard on: grad mode (training / evaluation), the dtype (autocast),
causality and a dimension of size 1, which dynamo always specialises: a call with one sentence, one head or one
position runs eager instead (cheap there).

A call that does not run compiled never runs the unfused flex (which materialises every head's scores): compiled
with `fullgraph=True`, the recompile limit and a graph break are errors, and where dynamo runs the body uncompiled
(disabled) it raises `NotCompiled`. The attention then takes the eager path; `warn_not_compiled` says so once for the
limit, `failed` once for an error, which is remembered for what failed (device type, head dim, dtype) only.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.fx.experimental._config
from transformers import AttentionInterface

from .attention_functions import FLEX

try:
    from torch.nn.attention.flex_attention import flex_attention
except ImportError:  # torch < 2.5: no fused score_mod kernel, method heads stay eager
    flex_attention = None

#: devices where FlexAttention runs compiled, with a backward. Elsewhere (the CPU) `syntax_attention_kernel="fused"`
#: runs flex's unfused reference path, without gradient: it checks the score_mods (flex has no CPU backward)
COMPILED_DEVICES: tuple[str, ...] = ("cuda",)
#: the options of the one `torch.compile` of the kernel (tests compile with backend="aot_eager" on the CPU).
#: `fullgraph`: a graph break (which would run flex unfused, silently) is an error, and so is the recompile limit
COMPILE_OPTIONS: dict = {"dynamic": True, "fullgraph": True}
if torch.__version__.startswith("2.6."):  # as transformers: training flex on 2.6 needs it (pytorch #146260)
    COMPILE_OPTIONS["mode"] = "max-autotune-no-cudagraphs"
#: the smallest head dim Inductor's flex kernel takes, per device type; smaller heads take the eager path untried
MIN_HEAD_DIM = {"cuda": 16}

_compiled: Callable | None = None
_failed: dict[tuple[str, int, torch.dtype], str] = {}  # (device type, head dim, dtype) -> the error
_warned: set = set()


class NotCompiled(RuntimeError):
    """The compiled kernel's body ran uncompiled (dynamo's recompile limit, or dynamo disabled or failing)."""


def limit_reached(error: Exception) -> bool:
    """Whether `error` is dynamo's "recompile limit reached" (raised under `fullgraph=True`; its name before torch
    2.7: `FailOnCacheLimitHit`): not a failure of the kernel, whose existing graphs still serve other calls."""
    return isinstance(error, NotCompiled) or type(error).__name__ in ("FailOnRecompileLimitHit", "FailOnCacheLimitHit")


def reset() -> None:
    """Forget the compiled kernel, the failures and the warnings given (tests; a new `COMPILE_OPTIONS`)."""
    global _compiled
    _compiled = None
    _failed.clear()
    _warned.clear()


def key_valid(attention_mask: torch.Tensor | None, batch: int, key_length: int, device) -> torch.Tensor:
    """`(B, S)` bool, True for the keys a query may see apart from causality: from the mask the attention received
    (`None`, boolean True = attend, or additive `(B|1, 1, T, S)`), read on its last query row (which sees every key
    causality allows)."""
    if attention_mask is None:
        return torch.ones(batch, key_length, dtype=torch.bool, device=device)
    row = attention_mask[:, 0, -1, :]  # (B|1, S)
    if row.dtype != torch.bool:
        row = row > torch.finfo(row.dtype).min / 2
    return row.expand(batch, key_length).contiguous()


def can_run(device: torch.device, head_dim: int, dtype: torch.dtype, needs_grad: bool, sizes) -> bool:
    """Whether the fused heads go to FlexAttention: it exists, nothing failed for this (device, head dim, dtype), the
    head dim is one its kernel takes, a gradient only where it runs compiled (with a backward), and on a compiled
    device no dimension of `sizes` (B, h, T, S) is 1 (dynamo would compile another graph for it)."""
    if flex_attention is None or (device.type, head_dim, dtype) in _failed:
        return False
    if head_dim < MIN_HEAD_DIM.get(device.type, 0):
        return False
    if device.type not in COMPILED_DEVICES:
        return not needs_grad
    return min(sizes) > 1


def _score_mod_attention(query, key, value, mods, group, rank, valid, causal: bool, scale: float) -> torch.Tensor:
    """FlexAttention over `query` `(B, h, T, d)`, `key`/`value` `(B, h, S, d)`: head `i` with `group[i] = g >= 0` gets
    `mods[g](score, b, rank[i], q_idx, kv_idx)` (`rank`: its index in its group), the others the plain score; then
    keys with `valid[b, kv_idx]` False (and, if `causal`, keys after the query) are masked. Returns `(B, h, T, d)`."""
    offset = key.shape[2] - query.shape[2]  # causal: query t (of T, the last T of S positions) sees keys 0..S-T+t

    def score_mod(score, b, h, q_idx, kv_idx):
        for g, mod in enumerate(mods):
            score = torch.where(group[h] == g, mod(score, b, rank[h], q_idx, kv_idx), score)
        keep = valid[b, kv_idx]
        if causal:
            keep = keep & (kv_idx <= q_idx + offset)
        return torch.where(keep, score, -float("inf"))

    return flex_attention(query, key, value, score_mod=score_mod, scale=scale)


def _compiled_body(query, key, value, mods, group, rank, valid, causal: bool, scale: float) -> torch.Tensor:
    if not torch.compiler.is_compiling():
        raise NotCompiled  # dynamo ran this frame uncompiled: the caller takes the eager path, not the unfused flex
    return _score_mod_attention(query, key, value, mods, group, rank, valid, causal, scale)


def _reference(*args) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return _score_mod_attention(*args)


def flex(query, key, value, mods, group, rank, valid, causal: bool, scale: float) -> torch.Tensor:
    """`_score_mod_attention` compiled on `COMPILED_DEVICES` (inlined into an enclosing `torch.compile`), its
    reference path elsewhere. Raises `NotCompiled` when the compiled kernel did not run."""
    args = (query, key, value, mods, group, rank, valid, causal, scale)
    if query.device.type not in COMPILED_DEVICES:
        return _reference(*args)
    if torch.compiler.is_compiling():  # inside the user's torch.compile(model): traced into their graph
        return _score_mod_attention(*args)
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_compiled_body, **COMPILE_OPTIONS)
    # no duck sizing: a batch of 6 sentences of 6 tokens would otherwise tie B to S in the graph (another graph when
    # they differ); set around the call, as the graph is traced inside it
    shapes = torch.fx.experimental._config
    duck = getattr(shapes, "use_duck_shape", None)
    if duck is None:
        return _compiled(*args)
    shapes.use_duck_shape = False
    try:
        return _compiled(*args)
    finally:
        shapes.use_duck_shape = duck


def _limit() -> str:
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # torch 2.6: the old name
    return f"torch._dynamo.config.{name} (now {getattr(config, name)})"


def warn_not_compiled() -> None:
    """Say once per process that a call of the fused heads did not run compiled and took the eager path."""
    if "not_compiled" in _warned:
        return
    _warned.add("not_compiled")
    warnings.warn(
        "hf_syntax_mt: the compiled FlexAttention kernel of the fused syntax heads (PASCAL) did not run for a call: "
        f"dynamo reached its recompile limit for it ({_limit()}), or is disabled or could not compile it. Such calls "
        "take the eager path (the same values, slower, more memory); calls whose graph exists stay compiled. "
        'TORCH_LOGS="recompiles" shows what changed between calls; raise the limit if your run needs more graphs, '
        "or set syntax_attention_kernel='eager' to choose the eager path from the start.",
        RuntimeWarning,
        stacklevel=4,
    )


def failed(error: Exception, device: torch.device, head_dim: int, dtype: torch.dtype) -> None:
    """Remember that FlexAttention failed for (device type, head dim, dtype), so that only such calls skip it from
    now on, and say so once for each."""
    key = (device.type, head_dim, dtype)
    first = str(error).splitlines()[0][:200] if str(error) else ""
    _failed[key] = f"{type(error).__name__}: {first}"
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(
        f"hf_syntax_mt: FlexAttention failed here ({_failed[key]}) on {device.type} with head dim {head_dim} and "
        f"{dtype}; the fused syntax heads of such calls take the eager path from now on (the same values, slower); "
        "other head dims, dtypes and devices still try it. syntax_attention_kernel='eager' chooses the eager path "
        "from the start.",
        RuntimeWarning,
        stacklevel=4,
    )


def compiled_on(device: torch.device) -> bool:
    """Whether FlexAttention runs compiled (with a backward) on `device`: where `"auto"` uses it."""
    return device.type in COMPILED_DEVICES


def _head_groups(module, spans: tuple, h: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """`(h,)` long tensors for `spans` ((first, stop) per fused group): each head's group (-1: none) and its index
    in the group; data, so that every layer shares one compiled graph. Built once per layout and device, kept on the
    attention `module`."""
    cache = module.__dict__.setdefault("_flex_heads_cache", {})
    key = (spans, h, str(device))
    if key not in cache:
        group, rank = torch.full((h,), -1, dtype=torch.long), torch.zeros(h, dtype=torch.long)
        for g, (a, b) in enumerate(spans):
            group[a:b], rank[a:b] = g, torch.arange(b - a)
        cache[key] = (group.to(device), rank.to(device))
    return cache[key]


def flex_hook_attention(
    module,
    query,
    key,
    value,
    attention_mask,
    scaling=None,
    dropout=0.0,
    context=None,
    groups=(),
    causal=False,
    **kwargs,
) -> tuple[torch.Tensor | None, None]:
    """The heads of `query` `(B, h, T, d)` in one FlexAttention call (`flex`) whose score_mod applies each fused
    group's `Method.score_mod` to its heads (`groups`: method, first and stop head among these heads, then in the
    layer), padding given as `(B, S)` key-valid and causality by position; `attention_mask` is the mask the
    configured kernel received (read directly when it is eager's or sdpa's, else through `context.mask`, the additive
    one). Returns `(B, T, h, d)` and None, or (None, None) where the compiled kernel did not run or failed (said once,
    `warn_not_compiled` / `failed`): the attention then takes the eager path."""
    try:
        mods = [m.score_mod(context, start, stop) for m, a, b, start, stop in groups]
        B, h, T, _ = query.shape
        group, rank = _head_groups(module, tuple((a, b) for _, a, b, _, _ in groups), h, query.device)
        # eager's and sdpa's own masks as they are (None without padding: one graph fewer); a BlockMask or flash's
        # (B, S) read through the normalised additive mask
        plain = attention_mask is None or (torch.is_tensor(attention_mask) and attention_mask.dim() == 4)
        mask = attention_mask if plain else context.mask
        valid = key_valid(mask, B, key.shape[2], query.device)  # (B, S)
        out = flex(query, key, value, mods, group, rank, valid, causal, scaling)  # (B, h, T, d)
    except Exception as error:  # noqa: BLE001 - a kernel that cannot run here must not stop the run
        if limit_reached(error):  # dynamo's recompile limit, or dynamo disabled
            warn_not_compiled()
        else:  # e.g. it cannot compile here: not tried again for this device, head dim and dtype
            failed(error, query.device, query.shape[-1], query.dtype)
        return None, None
    return out.transpose(1, 2), None  # (B, T, h, d)


flex_hook_attention.can_run = can_run
flex_hook_attention.compiled_on = compiled_on
AttentionInterface.register(FLEX, flex_hook_attention)
