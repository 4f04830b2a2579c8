"""The models' output classes: transformers' outputs plus the document context the decoder reads and each term of
the objective."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput


@dataclass
class SyntaxMTEncoderOutput(BaseModelOutput):
    r"""
    `BaseModelOutput` plus the document context the decoder reads; batch-first, so `generate()` copies them
    for beams with the rest of the encoder outputs.

    context_key_values (`torch.FloatTensor` of shape `(batch_size, n_dec, 2, num_heads, context_length, head_dim)`):
        Keys and values of C^(N_c) for each decoder context attention (Eq. 16), computed once per sentence.
    context_attention_mask (`torch.LongTensor` of shape `(batch_size, context_length)`):
        1 for real context tokens.
    """

    context_key_values: torch.FloatTensor | None = None
    context_attention_mask: torch.Tensor | None = None


@dataclass
class SyntaxMTSeq2SeqLMOutput(Seq2SeqLMOutput):
    r"""
    `Seq2SeqLMOutput` plus each term of the objective (already included in `loss`, unweighted here; each summed over
    tokens and divided by the batch's target tokens; None where its method is not active). The mapping from a
    method's loss to the output: every name a method declares in `Method.losses` is the output's key and attribute of
    that name (`out["decoder_deprel_loss"]`, `out.decoder_deprel_loss`), set when the method is active; the terms
    below are also typed fields (`AUXILIARY_LOSSES`), None when inactive; a newer method's term, built in or not,
    is a key only.

    translation_loss: the (label-smoothed) cross-entropy L_t.
    dbsa_loss: L_dep of Eq. 5, source and target parse losses of the DBSA heads.
    lisa_loss: the LISA heads' parse loss.
    sync_loss: L_sync of Eq. 9.
    fertility_loss: the global-fertility negative log-likelihood (before `config.global_fertility_weight`), when
        it is active.
    alignment_loss: guided alignment's L_a (Garg et al. 2019), -sum_t log A[t, a_t] per target token.
    """

    translation_loss: torch.FloatTensor | None = None
    dbsa_loss: torch.FloatTensor | None = None
    lisa_loss: torch.FloatTensor | None = None
    sync_loss: torch.FloatTensor | None = None
    fertility_loss: torch.FloatTensor | None = None
    alignment_loss: torch.FloatTensor | None = None


#: the auxiliary losses of the built-in methods (each is also a field of `SyntaxMTSeq2SeqLMOutput`)
AUXILIARY_LOSSES = ("dbsa_loss", "lisa_loss", "sync_loss", "fertility_loss", "alignment_loss")
