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
        cross: `2 * L` tensors `(N, H, S, d)` (each layer's cross-attention keys and values, `cross_cache`);
        past: `2 * L` tensors `(N, H, T, d)` (each layer's self-attention keys and values so far; T may be 0).
    Returns the logits `(N, V)` (float32, `final_logits_bias` added) and the `2 * L` self-attention caches
    `(N, H, T + 1, d)`.
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

    def cross_cache(self, memory: torch.Tensor) -> list[torch.Tensor]:
        """Each layer's cross-attention keys and values from the encoder output `(N, S, D)`: `2 * L` tensors
        `(N, H, S, d)`, computed once per batch."""
        out = []
        for layer in self.layers:
            attention = layer.encoder_attn
            out += [self._heads(attention.k_proj(memory)), self._heads(attention.v_proj(memory))]
        return out

    # Rewritten from transformers.models.marian.modeling_marian.MarianDecoder.forward and MarianDecoderLayer.forward
    # for one decoding step in evaluation (no dropout; the self-attention needs no mask, the newest token sees every
    # earlier one): not a textual copy, so tests/models/test_upstream_copies.py checks its logits against the installed
    # MarianMTModel's, step by step
    def forward(self, tokens, position, memory_mask, cross: list[torch.Tensor], past: list[torch.Tensor]):
        n = tokens.shape[0]
        sdpa = nn.functional.scaled_dot_product_attention
        hidden = self.embed_tokens(tokens) * self.embed_scale  # (N, 1, D)
        hidden = hidden + self.embed_positions.weight[position].unsqueeze(0)  # Marian's sinusoidal position
        present = []
        for i, layer in enumerate(self.layers):
            attention = layer.self_attn
            key = torch.cat([past[2 * i], self._heads(attention.k_proj(hidden))], dim=2)  # (N, H, T + 1, d)
            value = torch.cat([past[2 * i + 1], self._heads(attention.v_proj(hidden))], dim=2)
            present += [key, value]
            out = sdpa(self._heads(attention.q_proj(hidden)), key, value)  # (N, H, 1, d): sees every earlier token
            out = out.transpose(1, 2).reshape(n, 1, -1)  # (N, 1, D)
            hidden = layer.self_attn_layer_norm(hidden + attention.out_proj(out))
            attention = layer.encoder_attn
            out = sdpa(self._heads(attention.q_proj(hidden)), cross[2 * i], cross[2 * i + 1], attn_mask=memory_mask)
            out = out.transpose(1, 2).reshape(n, 1, -1)
            hidden = layer.encoder_attn_layer_norm(hidden + attention.out_proj(out))
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

    def rows(self, memory: torch.Tensor, attention_mask: torch.Tensor | None) -> _TorchRows:
        with torch.inference_mode():
            return _TorchRows(self.step, self.step.cross_cache(memory), memory_mask(attention_mask, memory))

    def generate(self, input_ids, attention_mask=None, **kwargs):
        from .search import generate_with

        return generate_with(self, self.model, input_ids, attention_mask, **kwargs)


class _TorchRows:
    def __init__(self, module: MarianDecoderStep, cross: list[torch.Tensor], mask: torch.Tensor):
        self.module, self.cross, self.mask = module, cross, mask
        n, h, _, d = cross[0].shape
        self.past = [cross[0].new_zeros(n, h, 0, d)] * len(cross)

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
