"""One step of a Marian decoder with a key/value cache, written out from the model's own modules: the graph that
`decoding.onnx_engine` exports to ONNX Runtime (and that the tests run in torch against `generate`).

Every option that changes only the encoder (PASCAL, the tree methods, `tree_bias`, input features, DBSA/LISA encoder
heads, ...) leaves the decoder Marian's: such a model decodes with this step after its own encoder ran in torch.
Options that change the decoder at inference (method heads in decoder self- or cross-attention, document context)
are refused by `check_marian_decoder`.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import UserError


def decoder_changes(config) -> list[str]:
    """What makes ``config``'s decoder differ from Marian's at inference (empty: the decoder is Marian's): the
    methods with heads in the decoder's self- or cross-attention, and document context."""
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..methods.registry import head_layout

    if not isinstance(config, SyntaxMTConfig):  # transformers' MarianConfig: Marian's decoder
        return []

    found = []
    for site, heads in (("decoder", config.decoder_attention_heads), ("cross", config.decoder_attention_heads)):
        for layer in range(config.decoder_layers):
            for method, _, _ in head_layout(config, site, layer, heads):
                what = f"{method.name} ({'decoder self-attention' if site == 'decoder' else 'cross-attention'} heads)"
                if what not in found:
                    found.append(what)
    if getattr(config, "context_sentences", 0):
        found.append(f"document context (context_sentences={config.context_sentences})")
    return found


def check_marian_decoder(config, engine: str) -> None:
    """Raise a `UserError` naming the options when ``config``'s decoder is not Marian's at inference."""
    changes = decoder_changes(config)
    if changes:
        raise UserError(
            f"engine={engine!r} decodes with Marian's decoder, but this model's decoder is changed by "
            f"{', '.join(changes)}: translate it with engine='generate' (the default)."
        )


class MarianDecoderStep(nn.Module):
    """One decoding step of a Marian decoder (post-norm layers, no final layer norm), reading the weights of
    ``model`` (a `SyntaxMTForConditionalGeneration` whose decoder is Marian's, or a `MarianMTModel`; shared, not
    copied).

    `forward(tokens, position, memory_mask, cross, past)`:
        tokens: `(N, 1)` the last token of each row; position: `(1,)` its position (all rows have the same length);
        memory_mask: `(N, 1, 1, S)` additive (0 for source tokens, a large negative number for padding);
        cross: `2 * L` tensors, each layer's cross-attention keys `(N, H, d, S)` (transposed) and values
            `(N, H, S, d)` (`cross_cache`);
        past: `2 * L` tensors, each layer's self-attention keys `(N, H, d, T)` (transposed) and values `(N, H, T, d)`
            so far (`empty_past`: T = 0).
    Returns the logits `(N, V)` (float32, `final_logits_bias` added) and the `2 * L` self-attention caches, one
    position longer.

    The keys are kept transposed, and a single query's heads are a view of its projection, so that a step transposes
    nothing: ONNX Runtime spent 11% of a beam-4 batch-32 step transposing every cached key for `Q K^T` and 7% scaling
    them (the exporter's decomposition of SDPA), both gone here (`benchmarks/probes/onnx_profile.py`; before and after:
    `benchmarks/results/deploy/onnx_profile_before.json` and `onnx_profile.json`).
    """

    def __init__(self, model):
        super().__init__()
        config = model.config
        decoder = model.get_decoder()
        self.num_heads = config.decoder_attention_heads
        self.head_dim = config.d_model // self.num_heads
        self.embed_tokens = decoder.embed_tokens
        self.embed_scale = float(decoder.embed_scale)
        self.embed_positions = decoder.embed_positions
        self.layers = decoder.layers
        self.lm_head = model.lm_head
        self.final_logits_bias = model.final_logits_bias

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        n, t, _ = x.shape
        return x.view(n, t, self.num_heads, self.head_dim).transpose(1, 2)  # (N, H, T, d)

    def cross_cache(self, memory: torch.Tensor, repeat: int = 1) -> list[torch.Tensor]:
        """Each layer's cross-attention keys `(N, H, d, S)` and values `(N, H, S, d)` from the encoder output
        `(B, S, D)`, computed once per batch: `2 * L` tensors, each row repeated ``repeat`` times (N = B * repeat,
        sentence-major: a sentence's beams), so that the projections run once per sentence, not once per beam."""
        out = []
        for layer in self.layers:
            attention = layer.encoder_attn
            key = self._heads(attention.k_proj(memory)).transpose(2, 3)  # (B, H, d, S)
            out += [key, self._heads(attention.v_proj(memory))]
        if repeat > 1:
            out = [c.repeat_interleave(repeat, dim=0) for c in out]
        return [c.contiguous() for c in out]

    def empty_past(self, rows: int, like: torch.Tensor) -> list[torch.Tensor]:
        """The self-attention caches before the first step: keys `(N, H, d, 0)` and values `(N, H, 0, d)`."""
        h, d = self.num_heads, self.head_dim
        return [like.new_zeros(rows, h, d, 0), like.new_zeros(rows, h, 0, d)] * len(self.layers)

    def _attend(self, attention, hidden, key_t, value, mask=None):
        """One query per row against its keys: `softmax(q K^T * scaling + mask) V`, the heads of the single query a
        view of its projection (`(N, 1, D)` and `(N, H, 1, d)` share one memory order)."""
        n = hidden.shape[0]
        query = attention.q_proj(hidden).view(n, self.num_heads, 1, self.head_dim)  # (N, H, 1, d)
        scores = torch.matmul(query, key_t) * attention.scaling  # (N, H, 1, T)
        if mask is not None:
            scores = scores + mask
        probs = nn.functional.softmax(scores, dim=-1)
        return attention.out_proj(torch.matmul(probs, value).view(n, 1, -1))  # (N, 1, D)

    # Rewritten from transformers.models.marian.modeling_marian.MarianDecoder.forward and MarianDecoderLayer.forward
    # (and eager_attention_forward) for one decoding step in evaluation (no dropout; the self-attention needs no mask,
    # the newest token sees every earlier one): not a textual copy, so tests/models/test_upstream_copies.py checks its
    # logits against the installed MarianMTModel's, step by step
    def forward(self, tokens, position, memory_mask, cross: list[torch.Tensor], past: list[torch.Tensor]):
        n = tokens.shape[0]
        h, d = self.num_heads, self.head_dim
        hidden = self.embed_tokens(tokens) * self.embed_scale  # (N, 1, D)
        hidden = hidden + self.embed_positions.weight[position].unsqueeze(0)  # Marian's sinusoidal position
        present = []
        for i, layer in enumerate(self.layers):
            attention = layer.self_attn
            key_t = torch.cat([past[2 * i], attention.k_proj(hidden).view(n, h, d, 1)], dim=3)  # (N, H, d, T + 1)
            value = torch.cat([past[2 * i + 1], attention.v_proj(hidden).view(n, h, 1, d)], dim=2)  # (N, H, T + 1, d)
            present += [key_t, value]
            hidden = layer.self_attn_layer_norm(hidden + self._attend(attention, hidden, key_t, value))
            out = self._attend(layer.encoder_attn, hidden, cross[2 * i], cross[2 * i + 1], memory_mask)
            hidden = layer.encoder_attn_layer_norm(hidden + out)
            feed_forward = layer.fc2(layer.activation_fn(layer.fc1(hidden)))
            hidden = layer.final_layer_norm(hidden + feed_forward)
        logits = self.lm_head(hidden[:, 0]) + self.final_logits_bias  # (N, V)
        return logits.float(), present


def memory_mask(attention_mask: torch.Tensor | None, memory: torch.Tensor) -> torch.Tensor:
    """The additive cross-attention mask `(N, 1, 1, S)` of an encoder output `(N, S, D)` and its source mask."""
    n, s, _ = memory.shape
    if attention_mask is None:
        return torch.zeros(n, 1, 1, s, dtype=memory.dtype, device=memory.device)
    mask = torch.zeros(n, 1, 1, s, dtype=memory.dtype, device=memory.device)
    return mask.masked_fill(attention_mask.view(n, 1, 1, s) == 0, torch.finfo(memory.dtype).min)


class TorchDecoder:
    """`MarianDecoderStep` run in torch, with the `rows(memory, attention_mask)` interface of `OnnxDecoder`: the
    reference the ONNX graph is checked against, and the search's own test bed."""

    def __init__(self, model):
        check_marian_decoder(model.config, "torch")
        self.model = model
        self.step = MarianDecoderStep(model).eval()

    def rows(self, memory: torch.Tensor, attention_mask: torch.Tensor | None, repeat: int = 1) -> _TorchRows:
        """The decoder rows of an encoder output `(B, S, D)`, each sentence ``repeat`` times (its beams)."""
        with torch.inference_mode():
            cross = self.step.cross_cache(memory, repeat)
            mask = memory_mask(attention_mask, memory)
            mask = mask.repeat_interleave(repeat, dim=0) if repeat > 1 else mask
            return _TorchRows(self.step, cross, mask)

    def generate(self, input_ids, attention_mask=None, **kwargs):
        from .search import generate_with

        return generate_with(self, self.model, input_ids, attention_mask, **kwargs)


class _TorchRows:
    def __init__(self, module: MarianDecoderStep, cross: list[torch.Tensor], mask: torch.Tensor):
        self.module, self.cross, self.mask = module, cross, mask
        self.past = module.empty_past(cross[0].shape[0], cross[0])

    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        with torch.inference_mode():
            logits, self.past = self.module(tokens.view(-1, 1), torch.tensor([position]), self.mask, self.cross,
                                            self.past)  # fmt: skip
        return logits

    def keep(self, rows: torch.Tensor, same_source: bool) -> None:
        self.past = [p[rows] for p in self.past]
        if not same_source:
            self.cross = [c[rows] for c in self.cross]
            self.mask = self.mask[rows]


__all__ = ["MarianDecoderStep", "TorchDecoder", "check_marian_decoder", "decoder_changes", "memory_mask"]
