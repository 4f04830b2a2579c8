"""What the document-level context (Zhang et al. 2018) costs in arithmetic: matmul FLOPs of the sentence-level
Marian model and of what the context adds, for a training step and for greedy decoding, as functions of the model
dims and the source, target and context lengths; and the speed ratio those FLOPs allow (the bound that measured
throughput ratios are judged against, `benchmarks/speed/bench_context.py`).

FLOPs count every matrix product at 2 FLOPs per multiply-add, as `torch.utils.flop_counter.FlopCounterMode` counts
them (linear layers, the batched products of attention); element-wise work (softmax, layer norm, the gate's sigmoid
and mix, dropout) is not counted. Symbols: D = d_model, F = FFN width, V = vocabulary, S / T / M = source, target
and context length, N_c context encoder layers, n_e / n_d encoder / decoder layers with a context attention.

Per sentence, the context adds (forward; training is 3x forward: one product for the input gradient and one for
the weight gradient of every forward product):

- the context encoder, once per sentence: N_c (8 M D^2 + 4 M^2 D + 4 M D F);
- the keys and values of every context attention, once per sentence: (n_e + n_d) 4 M D^2;
- each encoder context attention: 4 S D^2 (W_Q, W_O) + 4 S M D (attention) + 4 S D^2 (the gate's W_i, W_s);
- each decoder context attention: the same with T for S: 8 T D^2 + 4 T M D (per decoding step: 8 D^2 + 4 M D).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ContextFlops", "context_flops"]


@dataclass(frozen=True)
class ContextFlops:
    """Matmul FLOPs of one batch: the sentence-level model's and the context's added share, per use."""

    train_sentence: float  # a training step (forward + backward) of the sentence-level model
    train_context: float  # what the context adds to it
    decode_sentence: float  # greedy decoding of T tokens (encoder once, T cached decoder steps)
    decode_context: float
    encode_sentence: float  # the encoder pass of decoding (`model.get_encoder()`): the sentence encoder
    encode_context: float  # what the context adds to it (context encoder, every context key/value, encoder sublayers)
    parts: dict  # forward FLOPs of each added part (context encoder, key/value projections, encoder/decoder sublayers)

    @property
    def train_bound(self) -> float:
        """The best throughput ratio (context model / sentence-level model) a training step can reach if time
        follows FLOPs."""
        return self.train_sentence / (self.train_sentence + self.train_context)

    @property
    def decode_bound(self) -> float:
        """The same for greedy decoding."""
        return self.decode_sentence / (self.decode_sentence + self.decode_context)

    @property
    def encoder_bound(self) -> float:
        """The same for decoding's encoder pass alone."""
        return self.encode_sentence / (self.encode_sentence + self.encode_context)

    @property
    def step_bound(self) -> float:
        """The same for decoding's steps alone (everything after the encoder pass; the sentence model computes its
        cross-attention keys/values in the first step, the context model its context keys/values in the encoder)."""
        steps_sentence = self.decode_sentence - self.encode_sentence
        steps_context = self.decode_context - self.encode_context
        return steps_sentence / (steps_sentence + steps_context)

    def phase_bound(self, encoder_seconds: float, step_seconds: float) -> float:
        """The decoding bound when each phase keeps the sentence model's own speed (FLOPs a second): with the
        sentence model's encoder pass taking `encoder_seconds` and its steps `step_seconds` (measured), the context
        model needs at least `encoder_seconds / encoder_bound + step_seconds / step_bound`. Stricter than
        `decode_bound` when the context adds most of its FLOPs to the faster phase, as on a CPU, where the small
        matmuls of a decoding step run far below the encoder's speed and the context's work is mostly encoder-side."""
        total = encoder_seconds + step_seconds
        return total / (encoder_seconds / self.encoder_bound + step_seconds / self.step_bound)

    def as_dict(self) -> dict:
        return {
            "train_sentence": self.train_sentence, "train_context": self.train_context,
            "decode_sentence": self.decode_sentence, "decode_context": self.decode_context,
            "encode_sentence": self.encode_sentence, "encode_context": self.encode_context,
            "train_bound": self.train_bound, "decode_bound": self.decode_bound, "encoder_bound": self.encoder_bound,
            "step_bound": self.step_bound, "forward_parts": dict(self.parts),
        }  # fmt: skip


def _encoder_layer(n: float, d: int, f: int, batch: int) -> float:
    """Forward FLOPs of a post-norm Transformer encoder layer over `n` tokens: Q, K, V, O; scores and weighted sum;
    the two FFN matrices."""
    return batch * (8 * n * d * d + 4 * n * n * d + 4 * n * d * f)


def context_flops(
    config,
    source_len: float,
    target_len: float,
    context_len: float,
    batch: int = 1,
    context_tokens: float | None = None,
) -> ContextFlops:
    """Matmul FLOPs of a batch for the model of `config` (a `SyntaxMTConfig` with `context_sentences > 0`) and the
    sentence-level Marian model of the same dims.

    Args:
        config: the model config (d_model, layers, FFN widths, vocabulary, context options).
        source_len, target_len, context_len: S, T (tokens decoded, or label length in training) and M, the padded
            lengths the tensors have.
        batch: sentences in the batch.
        context_tokens: real context tokens of the batch, which alone go through the key/value projections (the
            model projects real tokens only); default `batch * context_len`.

    Returns:
        `ContextFlops` (training = forward + backward with every parameter trained; decoding = greedy, with the
        decoder's self-attention keys/values and the cross-attention keys/values cached).
    """
    D, V = config.d_model, config.vocab_size
    Fe, Fd = config.encoder_ffn_dim, config.decoder_ffn_dim
    Le, Ld = config.encoder_layers, config.decoder_layers
    S, T, M, B = float(source_len), float(target_len), float(context_len), batch
    from .document_context import context_layers  # torch and transformers only when a config is costed

    n_e, n_d = len(context_layers(config, "encoder")), len(context_layers(config, "decoder"))
    gate = 4 * D * D if config.context_gating else 0  # W_i H + W_s SubLayer(H), per token
    real = B * M if context_tokens is None else float(context_tokens)

    # the sentence-level model, forward with teacher forcing
    encoder = Le * _encoder_layer(S, D, Fe, B)
    decoder_layer = 8 * T * D * D + 4 * T * T * D + 4 * T * D * D + 4 * S * D * D + 4 * T * S * D + 4 * T * D * Fd
    forward_sentence = encoder + B * Ld * decoder_layer + B * 2 * T * D * V  # + the output projection
    # greedy decoding: the encoder once; T steps, step t attends to t cached keys; cross keys/values once
    steps = T * (8 * D * D + 4 * D * D + 4 * S * D + 4 * D * Fd) + 2 * T * (T + 1) * D
    decode_sentence = encoder + B * Ld * (steps + 4 * S * D * D) + B * 2 * T * D * V

    # what the context adds
    parts = {
        "context_encoder": config.context_encoder_layers * _encoder_layer(M, D, Fe, B),
        "context_key_values": (n_e + n_d) * 4 * real * D * D,
        "encoder_context_attention": B * n_e * (4 * S * D * D + 4 * S * M * D + S * gate),
        "decoder_context_attention": B * n_d * (4 * T * D * D + 4 * T * M * D + T * gate),
    }
    forward_context = sum(parts.values())
    # decoding: the same per step (one query per step), so the decoder's share is the same sum over T steps
    decode_context = forward_context
    return ContextFlops(
        train_sentence=3 * forward_sentence, train_context=3 * forward_context,
        decode_sentence=decode_sentence, decode_context=decode_context, encode_sentence=encoder,
        encode_context=parts["context_encoder"] + parts["context_key_values"] + parts["encoder_context_attention"],
        parts=parts,
    )  # fmt: skip
