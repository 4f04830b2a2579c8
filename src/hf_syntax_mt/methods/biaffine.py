"""Bi-affine self-attention heads supervised by a dependency parse: LISA (Strubell et al. 2018, on subwords as in the
PASCAL paper) and DBSA (dependency-based self-attention, Deguchi et al. 2019; Eqs. 4-5 of the synchronous syntactic
attention paper), in the encoder and (DBSA, causal) the decoder.

A bi-affine head is a dot-product head whose query is `Q U` (Eq. 4), so when no loss reads it (inference) it runs in
the fast kernel with the other heads. In a layer the LISA heads come first, then the DBSA heads; one `biaffine_u`
`(k, d, d)` holds U of each, initialised to the identity (a retrofitted checkpoint is unchanged).
Supervision (training only): `lisa_parents`, `dbsa_heads` `(B, S)` and `decoder_dbsa_heads` `(B, T)`.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init

from ..validation import Option, check_bool, check_per_layer_heads, check_weight, checking
from .base import Method, per_layer
from .columns import Column, SubwordParse
from .records import AttentionContext, HeadRecord


def dependency_nll(logits: torch.Tensor, heads: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Summed -log P(head(t) = q) over valid tokens t, averaged over the heads of a layer (Eq. 5, one term).

    Args:
        logits: `(B, k, T, S)` masked attention logits of k supervised heads (softmax over S gives A_h).
        heads: `(B, T)` long, the position q of each token's head.
        valid: `(B, T)` bool, tokens that count.
    """
    B, k, T, S = logits.shape
    logp = nn.functional.log_softmax(logits.float(), dim=-1)  # (B, k, T, S)
    index = heads.clamp(0, S - 1).view(B, 1, T, 1).expand(B, k, T, 1)
    nll = -logp.gather(-1, index).squeeze(-1)  # (B, k, T)
    return nll.masked_fill(~valid.unsqueeze(1), 0.0).sum() / k


def decoder_dbsa_arcs(
    decoder_dbsa_heads: torch.Tensor, dec_valid: torch.Tensor, full_context: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The decoder parse loss's targets: for each decoder position, the position of its head, and which arcs the
    loss supervises.

    Args:
        decoder_dbsa_heads: `(B, T)` long, per label position the label position of its head (-100: none).
        dec_valid: `(B, T)` bool, the decoder positions that predict a label.
        full_context: supervise arcs to later tokens too (`decoder_dbsa_full_context`); otherwise they are left out,
            since a causal head cannot attend there.

    Returns:
        `(heads, valid)`, both `(B, T)`: decoder input t is label t-1, so label heads shift by one position.
    """
    T = decoder_dbsa_heads.shape[1]
    heads = torch.full_like(decoder_dbsa_heads, -100)
    heads[:, 1:] = torch.where(decoder_dbsa_heads[:, :-1] >= 0, decoder_dbsa_heads[:, :-1] + 1, -100)  # (B, T)
    valid = dec_valid & (heads >= 0) & (heads < T)
    valid &= dec_valid.gather(1, heads.clamp(0, T - 1))  # the head is a real decoder input
    if not full_context:
        valid &= heads <= torch.arange(T, device=heads.device)  # an arc to a later token cannot be predicted causally
    return heads, valid


def decoder_valid(labels: torch.Tensor | None, shape, device) -> torch.Tensor:
    """`(B, T)` bool: the decoder positions that predict a label. Position k holds label k-1 (shifted like labels),
    position 0 the start token; a padded batch must give the loss of each sentence alone, so the final label (</s>)
    never counts as an input even when padding follows it."""
    if labels is None:
        return torch.ones(*shape, dtype=torch.bool, device=device)
    return labels.to(device) != -100


def lisa_parents(sentence: SubwordParse, config) -> list[int]:
    """The `lisa_parents` column: a subword's parent is the first subword of its word's head (the root word: its own
    first subword; a special token: itself)."""
    return [t if w is None else min(sentence.head_subwords(w)) for t, w in enumerate(sentence.word_ids)]


def dbsa_heads(sentence: SubwordParse, config) -> list[int]:
    """The `dbsa_heads` (source) and `decoder_dbsa_heads` (target) columns: a non-final subword points to the next
    subword of its word, a final subword to the first subword of the head word; the root's final subword and a
    special token to themselves."""
    out: list[int] = []
    for t, w in enumerate(sentence.word_ids):
        if w is None:
            out.append(t)
            continue
        own = sentence.positions[w]  # sorted, contains t
        k = own.index(t)
        if k + 1 < len(own):
            out.append(own[k + 1])  # non-final subword -> next subword of the same word
        elif sentence.parse.heads[w] == 0:
            out.append(t)  # final subword of the root -> itself
        else:
            out.append(min(sentence.head_subwords(w)))
    return out


class Biaffine(Method):
    name = "biaffine"
    inference_needs = None  # dot-product heads whose query is Q U: U folds into q_proj (`export_state`)
    config_options = {
        "encoder_lisa_heads": Option(
            "list[int] | None",
            None,
            """Number of LISA heads (Strubell et al. 2018, on subwords as in the PASCAL paper) per encoder layer:
            bi-affine heads trained to attend to the first subword of the token's head word (`lisa_parents`).
            They follow the heads of the methods registered before them (`methods.head_kinds`).""",
            check=check_per_layer_heads,
        ),
        "encoder_dbsa_heads": Option(
            "list[int] | None",
            None,
            """Number of DBSA heads (dependency-based self-attention, Deguchi et al. 2019; Eq. 4-5 of the synchronous
            syntactic attention paper) per encoder layer: bi-affine heads `softmax(Q U K^T / sqrt(d))` trained on
            the subword heads `dbsa_heads`. They follow the LISA heads. Paper: one head in the first layer.""",
            check=check_per_layer_heads,
        ),
        "decoder_dbsa_heads": Option(
            "list[int] | None",
            None,
            """The same for the decoder (causal), trained on `decoder_dbsa_heads`; heads `0..k-1` of the layer.""",
            check=check_per_layer_heads,
        ),
        "dbsa_loss_weight": Option(
            "float | int",
            0.5,
            """lambda_dep of Eq. 5-6 (paper: 0.5). The source and target parse losses are summed (Eq. 5).""",
            check=checking(check_weight, "0 trains the heads without the parse loss"),
        ),
        "lisa_loss_weight": Option(
            "float | int",
            1.0,
            """Weight of the LISA parse loss.""",
            check=checking(check_weight, "0 trains the heads without the parse loss"),
        ),
        "decoder_dbsa_full_context": Option(
            "bool",
            False,
            """Target arcs that point to a later token cannot be predicted by a causal head and are left out of the
            decoder's parse loss. With `True`, the decoder parse loss is computed from the same bi-affine scores
            softmaxed over the *whole* target (a training-only auxiliary view; the attention that feeds the
            translation stays causal), so every arc is supervised.""",
            check=check_bool,
        ),
    }
    supervision = (
        Column("lisa_parents", "source_position", parse="source", compute=lisa_parents),
        Column("dbsa_heads", "source_position", parse="source", compute=dbsa_heads),
        Column("decoder_dbsa_heads", "target_position", parse="target", compute=dbsa_heads),
    )
    losses = ("dbsa_loss", "lisa_loss")
    tester_config = {"encoder_lisa_heads": [1, 0], "encoder_dbsa_heads": [1, 0], "decoder_dbsa_heads": [1, 0]}
    trainable = ("biaffine_u",)

    @staticmethod
    def kinds(config, site: str, layer: int) -> dict[str, int]:
        if site == "encoder":
            return {
                "lisa": per_layer(config, "encoder_lisa_heads", "encoder")[layer],
                "dbsa": per_layer(config, "encoder_dbsa_heads", "encoder")[layer],
            }
        if site == "decoder":
            return {"dbsa": per_layer(config, "decoder_dbsa_heads", "decoder")[layer]}
        return {}

    @staticmethod
    def uses_lisa(config) -> bool:
        """Whether `config` gives any encoder layer LISA heads."""
        return any(config.encoder_lisa_heads or [])

    @staticmethod
    def uses_encoder_dbsa(config) -> bool:
        """Whether `config` gives any encoder layer DBSA heads."""
        return any(config.encoder_dbsa_heads or [])

    @staticmethod
    def uses_decoder_dbsa(config) -> bool:
        """Whether `config` gives any decoder layer DBSA heads."""
        return any(config.decoder_dbsa_heads or [])

    def active(self, config) -> bool:
        return self.uses_lisa(config) or self.uses_encoder_dbsa(config) or self.uses_decoder_dbsa(config)

    def heads(self, config, site, layer):
        return sum(self.kinds(config, site, layer).values())

    def supervision_columns(self, config):
        columns = []
        if self.uses_lisa(config):
            columns.append("lisa_parents")
        if self.uses_encoder_dbsa(config):
            columns.append("dbsa_heads")
        if self.uses_decoder_dbsa(config) and config.dbsa_loss_weight > 0:  # trained on target trees
            columns.append("decoder_dbsa_heads")
        return tuple(columns)

    def describe(self, config):
        def layers(values):
            return ", ".join(f"layer {i}: {k}" for i, k in enumerate(values or []) if k)

        lines = []
        if self.uses_lisa(config):
            lines.append(f"LISA heads on subwords (Strubell et al. 2018, as in the PASCAL paper) in encoder "
                         f"{layers(config.encoder_lisa_heads)}; loss weight {config.lisa_loss_weight}.")  # fmt: skip
        if self.uses_encoder_dbsa(config) or self.uses_decoder_dbsa(config):
            lines.append(f"Dependency-based self-attention (Deguchi et al. 2019, Eqs. 4-5): encoder "
                         f"{layers(config.encoder_dbsa_heads) or 'none'}, decoder "
                         f"{layers(config.decoder_dbsa_heads) or 'none'}; lambda_dep={config.dbsa_loss_weight}.")  # fmt: skip
        return "\n".join(lines) or None

    # --- parameters -----------------------------------------------------------------------------------------
    def build_attention(self, attention, config, site, layer, num_heads):
        if not num_heads:
            attention.biaffine_u = None
            return
        # U of Eq. 4, one (d, d) matrix per bi-affine head; initialised to the identity (a plain head)
        attention.biaffine_u = nn.Parameter(torch.empty(num_heads, attention.head_dim, attention.head_dim))
        attention.biaffine_kinds = self.kinds(config, site, layer)

    def init_weights(self, module, config):
        u = getattr(module, "biaffine_u", None)
        if isinstance(u, nn.Parameter):
            # U = I: a bi-affine head starts as a plain dot-product head (a retrofitted checkpoint is unchanged)
            init.copy_(u, torch.eye(module.head_dim, dtype=u.dtype, device=u.device).expand_as(u))

    # --- forward --------------------------------------------------------------------------------------------
    def needs_eager(self, ctx: AttentionContext) -> bool:
        return ctx.record is not None and ctx.record.record_heads

    def query(self, ctx, query, start, stop):
        return torch.einsum("bhtd,hde->bhte", query, ctx.module.biaffine_u)  # Eq. 4: Q_h U, (B, k, T, d)

    def record(self, ctx, record: HeadRecord, start, stop):
        if not ctx.record.record_heads:
            return
        offset = 0
        for kind, k in ctx.module.biaffine_kinds.items():
            if k:
                ctx.record.heads[(ctx.site, ctx.module.layer_idx, kind)] = HeadRecord(
                    record.logits[:, offset : offset + k], record.scores[:, offset : offset + k],
                    record.probs[:, offset : offset + k],
                )  # masked logits, raw scores, probabilities: (B, k, T, S) each  # fmt: skip
                offset += k

    # --- objective ------------------------------------------------------------------------------------------
    def wants_record(self, model, batch):
        config = model.config
        wanted = (
            (self.uses_lisa(config) and batch.get("lisa_parents") is not None)
            or (self.uses_encoder_dbsa(config) and batch.get("dbsa_heads") is not None)
            or (self.uses_decoder_dbsa(config) and batch.get("decoder_dbsa_heads") is not None)
        )
        return wanted, set()

    def loss(self, model, record, batch, outputs):
        aux: dict[str, torch.Tensor] = {}

        def add(name, value):
            aux[name] = aux[name] + value if name in aux else value

        attention_mask, labels = batch.get("attention_mask"), batch.get("labels")
        for (site, _, kind), head in record.heads.items():
            B, _, T, _ = head.logits.shape
            device = head.logits.device
            if site == "encoder":
                valid = (
                    torch.ones(B, T, dtype=torch.bool, device=device)
                    if attention_mask is None
                    else attention_mask.bool()
                )
                target = batch.get("lisa_parents" if kind == "lisa" else "dbsa_heads")
                if target is not None:
                    add(f"{kind}_loss", dependency_nll(head.logits, target.to(device), valid & (target >= 0)))
                continue
            target = batch.get("decoder_dbsa_heads")
            if target is None:
                continue
            dec_valid = decoder_valid(labels, (B, T), device)
            full = model.config.decoder_dbsa_full_context
            heads, valid = decoder_dbsa_arcs(target.to(device), dec_valid, full)
            logits = head.logits
            if full:
                # training-only view over the whole target: the same bi-affine scores, padding keys masked
                keys = torch.zeros_like(head.scores[:, :1, :1, :]).masked_fill(
                    ~dec_valid[:, None, None, :], float("-inf")
                )
                logits = head.scores + keys
            add("dbsa_loss", dependency_nll(logits, heads, valid))
        return aux

    def loss_weights(self, config):
        return {"dbsa_loss": config.dbsa_loss_weight, "lisa_loss": config.lisa_loss_weight}

    # --- export ---------------------------------------------------------------------------------------------
    def export_state(self, model, state):
        """Fold each bi-affine head's U into its rows of `q_proj`: Eq. 4 scores `(Q_h U_h) K_h^T / sqrt(d)`, and
        `Q_h U_h = (x W_h^T + b_h) U_h = x (U_h^T W_h)^T + U_h^T b_h`, so a plain head with `W_h' = U_h^T W_h` and
        `b_h' = U_h^T b_h` gives the same scores (the 1 / sqrt(d) scaling stays Marian's)."""
        for name, module in model.named_modules():
            if getattr(module, "biaffine_u", None) is None:
                continue
            heads, d = module.heads_of(self.name), module.head_dim
            u = state.pop(f"{name}.biaffine_u")  # (k, d, d), U of heads heads.start..heads.stop-1
            rows = slice(heads.start * d, heads.stop * d)
            for kind in ("weight", "bias"):
                key = f"{name}.q_proj.{kind}"
                if key not in state:  # a q_proj without bias
                    continue
                w = state[key]
                part = w[rows].float().unflatten(0, (len(heads), d))  # (k, d, D) or (k, d)
                folded = torch.einsum("hde,hd...->he...", u.float(), part)  # U_h^T W_h, U_h^T b_h
                w[rows] = folded.flatten(0, 1).to(w.dtype)
