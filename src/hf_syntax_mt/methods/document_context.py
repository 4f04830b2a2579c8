"""Document-level context (Zhang et al. 2018, *Improving the Transformer Translation Model with Document-Level
Context*): a context encoder over the previous k source sentences, context attention in encoder and decoder
layers, context gating, and the two-step training that freezes the sentence-level parameters.

- `ContextEncoder`: N_c self-attention layers over the context tokens X^c (Eqs. 4-9), sharing the source word
  embeddings and positional encoding. It also applies the key/value projections of *every* context-attention
  sublayer (Eqs. 12 and 16) to C^(N_c), fused in one matmul: they depend on the context only, so they run once per
  sentence, inside the encoder, before `generate()` copies the encoder outputs for beams. Decoding steps and beams
  reuse them; no cache slot is needed, and cached and uncached decoding read the same tensors.
- `ContextAttention`: the query/output half of one context-attention sublayer, `MultiHead(H, C, C)`, followed by the
  context gate (Eqs. 21-22) or a residual connection (Eq. 20), and layer normalisation (post-norm, as Marian).

A row whose `context_attention_mask` has no real token (the first sentence of a document, or no context given)
has *no context*: every context sublayer is the identity for it, so the document model then computes exactly the
sentence-level model it was built from.

Shortcuts that read the mask's values (no padding: no attention mask; every row with context: no row selection;
padding: project the real tokens only) are taken in eager mode on the CPU only, where reading a value waits for no
device. On an accelerator, or while `torch.compile` traces, the forward is branch-free: a branch on a
value would be a host sync per forward (and per decoding step) and a graph break under `fullgraph=True`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from transformers import PreTrainedConfig  # the SyntaxMTConfig, typed as its base: methods import nothing above them
from transformers.masking_utils import create_bidirectional_mask
from transformers.models.marian.modeling_marian import MarianEncoderLayer
from transformers.utils import logging

from ..errors import UserError
from ..validation import Option, check_bool, check_int, check_layer_list, checking
from .base import Method
from .columns import Column, DataTransform

logger = logging.get_logger(__name__)


def is_document_parameter(name: str) -> bool:
    """Whether parameter `name` belongs to theta_d, the document-level parameters added by the context options (the
    red modules of the paper's Figure 1b): the context encoder, context attentions and gates."""
    return any(part.startswith("context_") for part in name.split("."))


def has_context(context_attention_mask: torch.Tensor) -> torch.Tensor:
    """`(B,)` bool: rows with at least one real context token."""
    return context_attention_mask.bool().any(dim=-1)


class ContextMasks(NamedTuple):
    """The masks every context attention of a forward pass shares, built once from `context_attention_mask`:
    `attend` `(B, 1, 1, M)` bool (rows without context attend everywhere, their outputs are discarded), or `None`
    when no token is padding; `rows` `(B, 1, 1)` bool (rows with context), or `None` when every row has context
    (then no sublayer needs to select rows: a `where` and its backward saved in each of them). The `None`s are
    taken in eager mode on the CPU only (`reads_values`)."""

    attend: torch.Tensor | None
    rows: torch.Tensor | None


def reads_values(tensor: torch.Tensor) -> bool:
    """Whether the forward may branch on `tensor`'s values: in eager mode on the CPU, where reading one costs no host
    sync. Elsewhere (CUDA, or `torch.compile` tracing) the context path takes no branch over tensor values."""
    return tensor.device.type == "cpu" and not torch.compiler.is_compiling()


def context_masks(context_attention_mask: torch.Tensor) -> ContextMasks:
    """The `ContextMasks` of a pass, built once for every sublayer of the pass. Branch-free (both masks always
    tensors) but in eager mode on the CPU (`reads_values`), where the `None` shortcuts are taken."""
    rows = has_context(context_attention_mask)  # (B,)
    attend = _attend_mask(context_attention_mask)[:, None, None]  # (B, 1, 1, M)
    if not reads_values(context_attention_mask):
        return ContextMasks(attend, rows[:, None, None])
    return ContextMasks(None if bool(context_attention_mask.bool().all()) else attend,
                        None if bool(rows.all()) else rows[:, None, None])  # fmt: skip


def _attend_mask(context_attention_mask: torch.Tensor) -> torch.Tensor:
    """`(B, M)` bool mask where rows without context attend everywhere (their outputs are discarded), so no softmax
    runs over an empty set."""
    mask = context_attention_mask.bool()
    return mask | ~mask.any(dim=-1, keepdim=True)


def uses_context(config: PreTrainedConfig) -> bool:
    """Whether the model reads document-level context (`context_sentences > 0`)."""
    return config.context_sentences > 0


def context_layers(config: PreTrainedConfig, side: str) -> list[int]:
    """The `"encoder"` or `"decoder"` layers with a context-attention sublayer (none without context)."""
    if not uses_context(config):
        return []
    layers = getattr(config, f"{side}_context_layers")
    return list(range(getattr(config, f"{side}_layers"))) if layers is None else list(layers)


def context_sublayer(
    config: PreTrainedConfig, side: str, layer_idx: int
) -> tuple[int | None, ContextAttention | None]:
    """The context attention of `side` layer `layer_idx` and its slot in the keys/values of its side, or
    `(None, None)` when that layer has none."""
    layers = context_layers(config, side)
    if layer_idx not in layers:
        return None, None
    return layers.index(layer_idx), ContextAttention(config, getattr(config, f"{side}_attention_heads"))


class ContextEncoder(nn.Module):
    """Self-attentive context encoder (Section 2.2) plus the fused key/value projections of the context attentions.

    Args:
        config: the model config; `config.context_encoder_layers` = N_c, and `context_layers(config, side)` tells
            which encoder/decoder layers have a context attention (each gets its own W_K, W_V).
    """

    def __init__(self, config: PreTrainedConfig):
        super().__init__()
        self.config = config
        self.num_heads = config.encoder_attention_heads
        self.head_dim = config.d_model // self.num_heads
        self.dropout = config.dropout
        self.num_encoder_sublayers = len(context_layers(config, "encoder"))
        self.num_decoder_sublayers = len(context_layers(config, "decoder"))
        self.layers = nn.ModuleList([MarianEncoderLayer(config, i) for i in range(config.context_encoder_layers)])
        n = self.num_encoder_sublayers + self.num_decoder_sublayers
        # [W_K; W_V] of every context-attention sublayer, encoder layers first
        self.key_value_proj = nn.Linear(config.d_model, n * 2 * config.d_model)

    def forward(
        self,
        context_embeds: torch.Tensor,
        context_attention_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """
        Args:
            context_embeds: `(B, M, D)` X^c of Eq. 4 (scaled word embeddings + positional encoding).
            context_attention_mask: `(B, M)` 1 for real context tokens.

        Returns:
            C^(N_c) `(B, M, D)`; keys/values of the encoder sublayers `(B, n_enc, 2, H, M, d)` and of the decoder
            sublayers `(B, n_dec, 2, H, M, d)`.
        """
        hidden = nn.functional.dropout(context_embeds, p=self.dropout, training=self.training)  # C^(0) = X^c
        mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=hidden, attention_mask=_attend_mask(context_attention_mask)
        )
        for layer in self.layers:
            hidden = layer(hidden, mask)  # Eqs. 5-9: A^(n) = MultiHead(C^(n-1), C^(n-1), C^(n-1)), C^(n) = FNN(A^(n))
        real = context_attention_mask.bool()  # (B, M)
        # the largest matmul of the method; with padding, over the real tokens only (padding keys are masked anyway)
        # where the mask's values can be read for free (`reads_values`), else over every token (branch-free)
        tokens = hidden if not reads_values(real) or bool(real.all()) else hidden[real]  # (B, M, D) or (R, D)
        # one projection per side, not one over both and a `split`: split's backward would write the whole key/value
        # gradient once more (a memory pass as large as the projection's output)
        width = 2 * hidden.shape[-1] * self.num_encoder_sublayers
        weight, bias = self.key_value_proj.weight, self.key_value_proj.bias  # [W_K; W_V] of every sublayer
        # Eqs. 12 / 16: K = C^(N_c) W_K, V = C^(N_c) W_V per sublayer (rows: encoder sublayers, then decoder)
        encoder_kv = self._layout(nn.functional.linear(tokens, weight[:width], bias[:width]), real)
        decoder_kv = self._layout(nn.functional.linear(tokens, weight[width:], bias[width:]), real)
        return hidden, encoder_kv, decoder_kv

    def _layout(self, projected: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """Keys and values `(B, n, 2, H, M, d)`, contiguous, from the projection of every token `(B, M, n * 2 * D)`
        or of the real ones `(R, n * 2 * D)`: attention over permuted keys/values is ~3x slower at every decoding
        step, so the layout is made once per sentence."""
        (B, M), H, d = real.shape, self.num_heads, self.head_dim
        n = projected.shape[-1] // (2 * H * d)
        if projected.dim() == 3:
            return projected.view(B, M, n, 2, H, d).permute(0, 2, 3, 4, 1, 5).contiguous()  # (B, n, 2, H, M, d)
        # written straight into the final layout (no zero-filled (B, M, n*2*D) tensor to permute): real rows get
        # their keys/values, padding rows zeros (masked, but never uninitialised memory: 0 * NaN is NaN)
        kv = projected.new_empty(B, n, 2, H, M, d)  # (B, n, 2, H, M, d); bf16 under autocast
        by_token = kv.permute(0, 4, 1, 2, 3, 5)  # (B, M, n, 2, H, d), a view of kv
        by_token[~real] = 0
        by_token[real] = projected.view(projected.shape[0], n, 2, H, d)
        return kv


def key_value_pairs(kv: torch.Tensor) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """`(B, n, 2, H, M, d)` -> n `(key, value)` pairs of `(B, H, M, d)` views, by one `unbind`: its backward writes
    the gradient of all n sublayers' keys and values once (one `stack`), where indexing would fill a zero tensor per
    sublayer and nested unbinds would write it once per level."""
    slots = kv.flatten(1, 2).unbind(1)  # 2n of (B, H, M, d)
    return tuple(zip(slots[0::2], slots[1::2], strict=True))


class ContextAttention(nn.Module):
    """One context-attention sublayer (Eq. 12 in the encoder, Eq. 16 in the decoder) with its gate (Eqs. 21-22).

    The keys and values come precomputed from `ContextEncoder`; this module owns W_Q, W_O, the gate and the layer
    norm. Output for rows with context: `LayerNorm(Gating(H))` (or `LayerNorm(H + SubLayer(H))` without gating);
    rows without context get `H` unchanged.
    """

    def __init__(self, config: PreTrainedConfig, num_heads: int):
        super().__init__()
        d_model = config.d_model
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.dropout, self.attention_dropout = config.dropout, config.attention_dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        # Eq. 22: lambda = sigmoid(W_i H + W_s SubLayer(H)), no bias
        self.gate_input_proj = nn.Linear(d_model, d_model, bias=False) if config.context_gating else None  # W_i
        self.gate_sublayer_proj = nn.Linear(d_model, d_model, bias=False) if config.context_gating else None  # W_s
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value: tuple[torch.Tensor, torch.Tensor],
        masks: ContextMasks,
    ) -> torch.Tensor:
        """
        Args:
            hidden_states: `(B, T, D)` H, the output of the self-attention sublayer (B^(n) or E^(n)).
            key_value: keys and values of C^(N_c) for this sublayer, `(B, H, M, d)` each (`key_value_pairs`).
            masks: the pass's `ContextMasks` (`context_masks(context_attention_mask)`).

        Returns:
            `(B, T, D)` D^(n) (encoder) or F^(n) (decoder).
        """
        B, T, D = hidden_states.shape
        query = self.q_proj(hidden_states).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, d)
        key, value = key_value  # (B, H, M, d) each
        out = nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=masks.attend,
            dropout_p=self.attention_dropout if self.training else 0.0,
        )  # Eqs. 12 / 16: MultiHead(H, C, C), (B, H, T, d)  # fmt: skip
        sublayer = self.out_proj(out.transpose(1, 2).reshape(B, T, D))  # (B, T, D)
        sublayer = nn.functional.dropout(sublayer, p=self.dropout, training=self.training)
        if self.gate_input_proj is not None:
            # Eq. 22, the sum inside one addmm: W_s SubLayer(H) added to W_i H by the matmul itself
            gate = torch.addmm(
                self.gate_input_proj(hidden_states).view(B * T, D), sublayer.reshape(B * T, D),
                self.gate_sublayer_proj.weight.t(),
            ).view(B, T, D).sigmoid_()  # fmt: skip
            # Eq. 21: lambda H + (1 - lambda) SubLayer(H), in H's dtype (under autocast the projections are bf16)
            mixed = torch.lerp(sublayer.to(hidden_states.dtype), hidden_states, gate.to(hidden_states.dtype))
        else:
            mixed = hidden_states + sublayer  # Eq. 20
        out = self.layer_norm(mixed)
        return out if masks.rows is None else torch.where(masks.rows, out, hidden_states)


__all__ = [
    "ContextAttention",
    "ContextEncoder",
    "ContextMasks",
    "context_masks",
    "context_sublayer",
    "has_context",
    "is_document_parameter",
    "key_value_pairs",
    "reads_values",
]


def _check_context_limit(config, name: str) -> None:
    """`max_context_length`: None or a positive number of tokens (its bound by `max_position_embeddings` is checked
    in `DocumentContext.validate`, where a model's config has one)."""
    if getattr(config, name) is not None:
        check_int(config, name, 1, hint="the most recent context tokens kept; or None: max_position_embeddings")


class DocumentContext(Method):
    """Document-level context (Zhang et al. 2018) as a method: its options and columns, the context encoder
    (`build_encoder`, run once per sentence by `encoder_states`), a context-attention sublayer in chosen encoder and
    decoder layers between self-attention and the feed-forward network (`build_layer`, `sublayer`: Eqs. 12 and 16),
    the keys/values the decoder reads at every step (`decoder_states`) and theta_d for two-step training
    (`document_level`).

    Its inputs, keyword arguments of the model's `forward()` and `generate()` as every method's:

    - `context_input_ids` `(B, M)`: the previous k source sentences of the same document, tokenized with special
      tokens and concatenated, oldest first (`document_inputs`; `hf_syntax_mt.data.documents.encode_context` for the
      training data). `None`, or a row with no real token, means no context: that row gets the sentence-level
      computation. Ignored when `encoder_outputs` is given (they carry the encoded context).
    - `context_attention_mask` `(B, M)`: 1 for real context tokens, 0 for padding; defaults to all ones."""

    name = "document_context"
    inference_needs = (
        "extra modules: a context encoder and context-attention sublayers read the previous source "
        "sentences of the document"
    )
    config_options = {
        "context_sentences": Option(
            "int",
            0,
            """Document-level context (Zhang et al. 2018): k, the number of previous source sentences of the same
            document the model reads (paper best: 2). 0 (default): a sentence-level model, no parameter added.
            Inputs: `context_input_ids` / `context_attention_mask` (`hf_syntax_mt.data.documents`).""",
            check=checking(
                check_int,
                0,
                64,  # beyond, the context is cut to `max_context_length` tokens anyway
                hint="the number of previous source sentences read as context; the paper's best is 2; 0 switches document context off",
            ),
        ),
        "context_encoder_layers": Option(
            "int",
            1,
            """N_c, the number of self-attention layers of the context encoder (Eqs. 5-9; paper best: 1).""",
            check=checking(check_int, 1, hint="N_c; the paper's best is 1"),
        ),
        "encoder_context_layers": Option(
            "list[int] | None",
            None,
            """Encoder layers (0-based) that get a context-attention sublayer (Eq. 12). `None` (default): every layer;
            `[]`: none.""",
            check=checking(check_layer_list, "encoder", "None: every layer, []: none"),
        ),
        "decoder_context_layers": Option(
            "list[int] | None",
            None,
            """Decoder layers (0-based) that get a context-attention sublayer (Eq. 16). `None` (default): every layer;
            `[]`: none.""",
            check=checking(check_layer_list, "decoder", "None: every layer, []: none"),
        ),
        "context_gating": Option(
            "bool",
            True,
            """Replace the residual connection after each context attention by the context gate of Eqs. 21-22
            (paper best); `False` keeps a plain residual (Eq. 20).""",
            check=checking(check_bool, "True: the context gate of Eqs. 21-22, False: a residual"),
        ),
        "max_context_length": Option(
            "int | None",
            None,
            """Most context tokens kept (the most recent ones); `None` (default): `max_position_embeddings`.""",
            check=_check_context_limit,
        ),
    }
    tester_config = {"context_sentences": 1}
    trainable = ("context_encoder", "context_attn")
    inputs = (Column("context_input_ids", "context", pad="pad_token_id"), Column("context_attention_mask", "context"))
    transforms = (
        DataTransform(
            "Document context", "hf_syntax_mt.data.documents:document_context_step", stage="raw", reads="doc_id",
            flag="{split}_docid_file", options={"k": "context_sentences"},
            missing="context_sentences={context_sentences} needs document boundaries: give --{split}_docid_file (one "
                    "document id a line)",
        ),
    )  # fmt: skip

    def active(self, config) -> bool:
        return uses_context(config)

    def input_columns(self, config):
        return ("context_input_ids",) if self.active(config) else ()

    def validate(self, config) -> None:
        if uses_context(config) and not (context_layers(config, "encoder") or context_layers(config, "decoder")):
            raise UserError(
                f"context_sentences={config.context_sentences} but encoder_context_layers and decoder_context_layers are "
                "both empty: the context would reach nothing. Leave one of them None (every layer) or list layers."
            )
        if config.max_context_length is not None:
            check_int(config, "max_context_length", 1, config.max_position_embeddings, hint="at most "
                      f"max_position_embeddings={config.max_position_embeddings}: context tokens get position "
                      "embeddings; or None")  # fmt: skip

    def describe(self, config):
        if not self.active(config):
            return None
        gate = "context gating (Eqs. 21-22)" if config.context_gating else "residual connections (no gating)"
        return (f"Document-level context (Zhang et al. 2018): the previous {config.context_sentences} source "
                f"sentences, a {config.context_encoder_layers}-layer context encoder, context attention in "
                f"encoder layers {context_layers(config, 'encoder')} and decoder layers "
                f"{context_layers(config, 'decoder')}, {gate}. Translate documents with "
                "`pipe.translate_document(sentences)`.")  # fmt: skip

    # --- documents: the previous k source sentences, encoded as the context inputs (Section 2.1: X^(<k)) ----------
    document_option = "context_sentences"

    def document_window(self, config) -> int:
        return config.context_sentences

    def document_inputs(self, config, tokenizer, previous):
        """`context_input_ids` `(M,)`: each previous sentence tokenized on its own with the tokenizer's special tokens
        (Marian: `... </s>`), concatenated oldest first, the last `max_context_length` ids kept (the window may begin
        inside a sentence), as `hf_syntax_mt.data.documents.encode_context` makes the training data's; an empty or
        blank sentence adds nothing (only such sentences: `[]`, no context). `context_attention_mask`: ones."""
        texts = [s for s in previous if s is not None and str(s).strip()]
        rows = tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"] if texts else []
        ids = [int(i) for row in rows for i in row]
        # data made without a model (`registry.DataOptions`) has no max_position_embeddings: no limit but its own
        limit = config.max_context_length
        limit = getattr(config, "max_position_embeddings", None) if limit is None else limit
        ids = ids if limit is None else ids[max(0, len(ids) - limit) :]
        return {"context_input_ids": ids, "context_attention_mask": [1] * len(ids)}

    # --- the spine's hooks: the context encoder, its sublayers, the states they read, theta_d ---------------------
    def build_encoder(self, encoder, config):
        encoder.context_encoder = ContextEncoder(config) if uses_context(config) else None

    def build_layer(self, layer, config, side, layer_idx):
        layer.context_index, layer.context_attn = context_sublayer(config, side, layer_idx)

    def document_level(self, name: str) -> bool:
        return is_document_parameter(name)

    def encoder_states(self, encoder, config, inputs, batch_size):
        """Run the context encoder (Section 2.2) once: the keys/values of the encoder's context attentions and their
        masks for the encoder layers; the decoder's keys/values and the context mask as encoder output fields.

        In training the context path always runs, on one padding token when the batch has no context: every
        document-level parameter then takes part in the loss (with a zero gradient), so a batch of first sentences
        trains with frozen sentence-level parameters and DDP finds no unused parameter."""
        context_input_ids, context_attention_mask = (
            inputs.get("context_input_ids"),
            inputs.get("context_attention_mask"),
        )
        context_encoder = getattr(encoder, "context_encoder", None)
        if context_encoder is not None and encoder.training and torch.is_grad_enabled():
            if context_input_ids is None or context_input_ids.shape[-1] == 0:
                context_input_ids = torch.full(
                    (batch_size, 1), config.pad_token_id, dtype=torch.long, device=encoder.embed_tokens.weight.device
                )
                context_attention_mask = torch.zeros_like(context_input_ids)
        if context_input_ids is None:
            return {}, {}
        if context_encoder is None:
            logger.warning_once(
                "`context_input_ids` were given to a model without document context (context_sentences=0): they are "
                "ignored. Build the model with `context_sentences=k` to use them."
            )
            return {}, {}
        if context_input_ids.dim() != 2 or context_input_ids.shape[0] != batch_size:
            raise UserError(
                f"context_input_ids has shape {tuple(context_input_ids.shape)} but the batch has {batch_size} rows: "
                "give (batch_size, context_length) ids (`hf_syntax_mt.data.documents.encode_context`)."
            )
        if context_attention_mask is None:
            context_attention_mask = torch.ones_like(context_input_ids)
        if context_attention_mask.shape != context_input_ids.shape:
            raise UserError(
                f"context_attention_mask has shape {tuple(context_attention_mask.shape)} but context_input_ids "
                f"{tuple(context_input_ids.shape)}."
            )
        length = context_input_ids.shape[1]
        if length == 0:  # no row has context: the sentence-level model
            return {}, {}
        if length > encoder.max_source_positions:
            raise UserError(
                f"The context has {length} tokens but max_position_embeddings={encoder.max_source_positions}: keep "
                f"the most recent tokens (`encode_context(..., max_length={config.resolved_max_context_length})`)."
            )
        embeds = encoder.embed_tokens(context_input_ids) * encoder.embed_scale  # (B, M, D)
        embeds = embeds + encoder.embed_positions(context_input_ids.shape)  # Eq. 4: X^c, embedding + position
        _, encoder_kv, decoder_kv = context_encoder(embeds, context_attention_mask)
        # one (key, value) pair of (B, H, M, d) per context sublayer, by one unbind (one stack in backward); the
        # masks once for every layer
        states = {
            "context_key_values": key_value_pairs(encoder_kv),
            "context_masks": context_masks(context_attention_mask),
        }
        return states, {"context_key_values": decoder_kv, "context_attention_mask": context_attention_mask}

    def decoder_states(self, config, encoder_outputs):
        """The decoder's share of the encoded document context, read once per decoding step."""
        kv = getattr(encoder_outputs, "context_key_values", None)
        if kv is None:
            return {}
        # one (key, value) pair of (B, H, M, d) per decoder context sublayer (one unbind: see `encoder_states`);
        # masks built once per forward (one decoding step), not in every layer
        return {
            "context_key_values": key_value_pairs(kv),
            "context_masks": context_masks(encoder_outputs.context_attention_mask),
        }

    def sublayer(self, layer, hidden_states, states):
        """The context attention of Eq. 12 (encoder: D^(n)) or Eq. 16 (decoder: F^(n)), where the layer has one and
        the batch has context."""
        key_values = states.get("context_key_values")
        if layer.context_attn is None or key_values is None:
            return hidden_states
        return layer.context_attn(hidden_states, key_values[layer.context_index], states["context_masks"])
