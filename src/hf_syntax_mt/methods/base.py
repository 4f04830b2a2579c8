"""The `Method` base: every syntax- or document-aware method is one subclass, registered by name (`registry.py`).

Its hooks, grouped by the stage that calls them (each defaults to "does nothing"):

- **config**: its options (`config_options`, one `validation.Option` each: type, default, docstring and check), which
  become `SyntaxMTConfig` fields when the method is built in (registered before `SyntaxMTConfig` is created, i.e.
  listed in `methods/builtin.py`; the config stays flat and its docstring lists them) and the checks between them
  (`validate`); a method registered later keeps its options under `config.method_options[name]`. Whether a config
  switches it on (`active`), what the config derives for it (a method answers from the config: e.g.
  `Synchronous.sync_layer(config)`, `document_context.context_layers(config, side)`), its line for model cards and
  signatures (`describe`), and what the tiny-config tester needs of it (`tester_config`, `trainable`), so that
  tests/models/test_every_method.py holds no table of its own;
- **data**: the columns it needs: model inputs (`inputs`; the preprocessor, collator, pipeline and train script ask
  `input_columns`) and training-only supervision (`supervision`), each a `Column` that says what its values are
  aligned with, how they are padded and which parse they are computed from (the data side reads these and nothing
  else), the check of their values in a collated batch (`check_batch`), the train script's data steps beyond the
  columns (`data_transforms`: document context, alignment targets; `columns.DataTransform`) and the trainer callbacks
  it needs (`callbacks`);
- **model**: the self- and cross-attention heads it takes in each layer (`heads`, split into named kinds by `kinds`;
  heads are given out in registry order, and every reader of head positions asks `registry.head_layout` /
  `head_kinds`), its parameters (`build_attention`, `build_encoder`, `build_layer`, `build_model`, `init_weights`,
  `document_level`), its inputs on the way in (`embed`, `prepare`, `encoder_states`, `decoder_states`, `sublayer`),
  and its attention hooks, applied to its own heads on the eager score path of `SyntaxMTAttention`
  (`query` -> `scores` -> `logits` -> `probs` -> `record`), optionally with a fused form (`fused`: a FlexAttention
  `score_mod`, run where the opt-in `hf_syntax_mt.flex` is imported, or an additive `attention_bias` that SDPA
  takes as its mask, used instead of the eager path where `config.syntax_attention_kernel` and the device allow it;
  the eager path stays the reference); what several
  methods derive from the same inputs (tree distances) is computed once per forward (`records.shared`);
- **loss**: its auxiliary losses (`losses`, `wants_record`, `loss`, `loss_weights`), added to the cross-entropy by
  the model;
- **documents**: how many previous source sentences of its document each sentence is read with (`document_window`,
  set by the option `document_option`) and the inputs one sentence gets from them (`document_inputs`): the pipeline
  and `translate_document` ask these, and two-step training freezes what `document_level` does not claim;
- **inference and export**: what it needs at inference that a plain Marian model lacks (`inference_needs`) and how
  its parameters fold into Marian's (`export_state`).

Adding a method is one module with a `Method` subclass and `register(MyMethod())`: the attention class, the
encoder, the decoder and the generation class need no edit (tests/models/test_registry.py shows it with a toy).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..validation import Option
from .columns import DataTransform
from .records import AttentionContext, AttentionRecord, HeadRecord

__all__ = ["Method", "check_options", "per_layer"]


class Method:
    """Base class of a registered method; every hook defaults to "does nothing"."""

    # --- config ---------------------------------------------------------------------------------------------
    name: str = ""
    #: config options the method declares (name -> `Option`): `SyntaxMTConfig` fields when built in
    config_options: dict[str, Option] = {}
    #: what the tiny-config tester (tests/models/test_every_method.py, 2 + 2 layers of 4 heads) switches the method
    #: on with: config overrides; None fails the tester's coverage test until it is given
    tester_config: dict | None = None
    #: fragments of the parameter names one training step must change (the tester checks each)
    trainable: tuple[str, ...] = ()

    def active(self, config) -> bool:
        """Whether `config` switches the method on."""
        return False

    def validate(self, config) -> None:
        """Checks between its options (each option's own check is its `Option.check`, run first): raise a
        `UserError` naming the option and what to use."""

    def describe(self, config) -> str | None:
        """One line for model cards and signatures, or None when inactive."""
        return None

    # --- data -----------------------------------------------------------------------------------------------
    #: model inputs read at training and inference (data columns of the same names; a `Column` says its kind)
    inputs: tuple[str, ...] = ()
    #: training-only supervision columns (given to `forward()` with the labels, never to the encoder)
    supervision: tuple[str, ...] = ()

    @property
    def from_parse(self) -> bool:
        """Whether its inputs are computed from the source parse (the pipeline parses new text for them)."""
        return any(getattr(c, "parse", None) == "source" for c in self.inputs)

    def input_columns(self, config) -> tuple[str, ...]:
        return self.inputs if self.active(config) else ()

    def supervision_columns(self, config) -> tuple[str, ...]:
        return self.supervision if self.active(config) else ()

    def check_batch(self, batch: dict) -> None:
        """Check the values of its columns in a batch the collator built (CPU tensors, before they reach a device,
        where reading values is a host sync); raise a `UserError` naming the column, row and value."""

    #: the train script's data steps besides its columns (each a `columns.DataTransform`: what it reads, the flag
    #: that gives it, the function that runs)
    transforms: tuple[DataTransform, ...] = ()

    def data_transforms(self, config) -> tuple[DataTransform, ...]:
        """The data steps it runs for `config` (its `transforms` when active)."""
        return self.transforms if self.active(config) else ()

    def callbacks(self, config) -> tuple[str, ...]:
        """Trainer callbacks it needs for `config`, as ``"module:Class"`` (imported and added once by
        `SyntaxMTTrainer`; e.g. a loss schedule that reads the training step); none by default."""
        return ()

    # --- model: heads and parameters ------------------------------------------------------------------------
    def heads(self, config, site: str, layer: int) -> int:
        """Number of heads this method takes in the self-attention (`"encoder"`, `"decoder"`) or cross-attention
        (`"cross"`) of `layer`; `-1` means every head of that attention."""
        return 0

    def kinds(self, config, site: str, layer: int) -> dict[str, int]:
        """The method's heads in this attention by kind, in order (`{"lisa": 1, "dbsa": 2}`); by default one kind
        named after the method. The counts add up to `heads` (`-1`: every head)."""
        return {self.name: self.heads(config, site, layer)}

    def build_attention(self, attention: nn.Module, config, site: str, layer: int, num_heads: int) -> None:
        """Add this method's parameters to an attention module that has `num_heads` of its heads (called for every
        attention module, with `num_heads=0` where the method takes none)."""

    def build_encoder(self, encoder: nn.Module, config) -> None:
        """Add parameters to the encoder (e.g. feature embeddings, the document context's encoder)."""

    def build_layer(self, layer: nn.Module, config, side: str, layer_idx: int) -> None:
        """Add a sublayer to an `"encoder"` or `"decoder"` layer (called for every layer; run by `sublayer`)."""

    def build_model(self, model: nn.Module, config) -> None:
        """Add parameters to the translation model (e.g. the global-fertility network)."""

    def init_weights(self, module: nn.Module, config) -> None:
        """Initialise this method's parameters held by `module` (called by `_init_weights` for every module)."""

    def document_level(self, name: str) -> bool:
        """Whether parameter `name` is one this method adds for document-level reading (theta_d of two-step
        training: `freeze_sentence_level_parameters` keeps only those trainable)."""
        return False

    # --- model: the forward pass ----------------------------------------------------------------------------
    def embed(self, encoder: nn.Module, input_ids: torch.Tensor, embeds: torch.Tensor, inputs: dict) -> torch.Tensor:
        """Token embeddings `(B, S, D)` -> embeddings with this method's input (e.g. linguistic features)."""
        return embeds

    def prepare(self, config, inputs: dict, input_shape: torch.Size, attention_mask) -> dict:
        """Check this method's encoder inputs once per forward and return the attention inputs they become (the
        hooks' `ctx.inputs`, e.g. tree weights from `word_index` / `word_heads`; never given to the kernel)."""
        return {}

    def encoder_states(self, encoder: nn.Module, config, inputs: dict, batch_size: int) -> tuple[dict, dict]:
        """Once per encoder forward, for every registered method (active or not: an inactive one may warn about its
        inputs): (what its `sublayer` reads in every encoder layer, fields of the encoder output that the decoder
        reads through `decoder_states`, batch-first so that `generate()` copies them for beams)."""
        return {}, {}

    def decoder_states(self, config, encoder_outputs) -> dict:
        """Once per decoder forward (each decoding step): what its `sublayer` reads in every decoder layer, from the
        encoder output fields its `encoder_states` gave."""
        return {}

    def sublayer(self, layer: nn.Module, hidden_states: torch.Tensor, states: dict) -> torch.Tensor:
        """`(B, T, D)` -> `(B, T, D)`: its sublayer of `layer` (`build_layer`), after the layer's self-attention
        block; `states` holds what the `encoder_states` / `decoder_states` of the active methods gave."""
        return hidden_states

    # --- model: attention hooks (eager score path, and the fused form) --------------------------------------
    #: the fused form of its hooks, if any: "score_mod" (`score_mod`, run in FlexAttention) or "bias"
    #: (`attention_bias`, run in SDPA as an additive mask); None: its heads always take the eager path when they
    #: need it
    fused: str | None = None

    def needs_eager(self, ctx: AttentionContext) -> bool:
        """Whether its heads take the eager score path in this call (default: always, since its hooks change the
        scores or probabilities; a method whose hooks only record overrides it)."""
        return True

    def query(self, ctx: AttentionContext, query: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """The queries `(B, k, T, d)` of this method's heads `start..stop-1`."""
        return query

    def scores(self, ctx: AttentionContext, scores: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Scaled dot-product scores `(B, k, T, S)` of its heads, before the mask."""
        return scores

    def logits(self, ctx: AttentionContext, logits: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Masked logits `(B, k, T, S)` of its heads, before the softmax."""
        return logits

    def probs(self, ctx: AttentionContext, probs: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Attention probabilities `(B, k, T, S)` of its heads, before dropout."""
        return probs

    def record(self, ctx: AttentionContext, record: HeadRecord, start: int, stop: int) -> None:
        """Store what the loss needs in `ctx.record` (called only when a record is kept)."""

    def score_mod(self, ctx: AttentionContext, start: int, stop: int) -> Callable:
        """(`fused = "score_mod"`) A FlexAttention `score_mod(score, b, h, q_idx, kv_idx)` equal to this method's
        `scores` hook on its heads: `score` is the scaled dot product of one query/key pair, `h` the head *within
        this method's group* (0..stop-start-1). The attention masks padding after it. It is compiled (on CUDA),
        once for every layer and pass: let it read tensors only (captured in its closure), never a Python number,
        string or branch that differs between layers or passes, or each value compiles another graph, nor a
        module-level float (dynamo makes it a graph input, which breaks the backward; `hf_syntax_mt.flex`)."""
        raise NotImplementedError(f"Method {self.name!r} declares fused={self.fused!r} but has no score_mod.")

    def attention_bias(
        self, ctx: AttentionContext, query: torch.Tensor, key: torch.Tensor, start: int, stop: int
    ) -> torch.Tensor:
        """(`fused = "bias"`) The additive bias `(B, k, T, S)` that its `logits` hook adds to the masked logits of
        its heads, from their queries `(B, k, T, d)` (after the `query` hook) and keys `(B, k, S, d)`; the
        attention runs the heads in SDPA with `mask + bias` as the mask."""
        raise NotImplementedError(f"Method {self.name!r} declares fused={self.fused!r} but has no attention_bias.")

    # --- loss -----------------------------------------------------------------------------------------------
    #: names of the auxiliary losses it adds
    losses: tuple[str, ...] = ()

    def wants_record(self, model: nn.Module, batch: dict) -> tuple[bool, set[int]]:
        """(whether head groups must store their records, the cross-attention layers to keep) for this batch."""
        return False, set()

    def loss(self, model: nn.Module, record: AttentionRecord, batch: dict, outputs) -> dict[str, torch.Tensor]:
        """Auxiliary losses, summed over tokens (the model divides by the target tokens), unweighted."""
        return {}

    def loss_weights(self, config) -> dict[str, float]:
        return {}

    # --- documents: a sentence read with the previous source sentences of its document ----------------------------
    #: the option that sets `document_window`, named in messages and examples (`"context_sentences"`); None: the
    #: method never reads a document
    document_option: str | None = None

    def document_window(self, config) -> int:
        """How many previous source sentences of its document each sentence is read with (called only when the
        method is active; 0: none). The pipeline gives each sentence of a document that many, and refuses a sentence
        given without its document unless told to translate without context."""
        return 0

    def document_inputs(self, config, tokenizer, previous: list[str]) -> dict[str, list]:
        """The model inputs one sentence gets from its previous source sentences (oldest first, at most
        `document_window` of them; `[]` for the first sentence of a document): one unpadded row per input it declares
        (`inputs`), which the caller pads as the input's `Column` says."""
        return {}

    # --- inference and export -------------------------------------------------------------------------------
    #: what the method needs at inference that a plain Marian model lacks, for the export's refusal ("a parse at
    #: inference: ..." or "extra modules: ..."); None: its inference graph is Marian's once `export_state` has run
    #: (a training-only loss, or parameters that fold into Marian's weights). A method that does not set it is
    #: refused by `hf_syntax_mt.export`, so a new method is never exported by mistake.
    inference_needs: str | None = "code of its own at inference (the method does not declare `inference_needs = None`)"

    def export_state(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        """(`inference_needs = None`) Turn `state`, a copy of `model`'s state dict, into a plain `MarianMTModel`'s,
        in place: fold this method's parameters into Marian's weights, delete those only training reads."""


def check_options(method: Method, config) -> None:
    """Run the `check` of every option `method` declares (built in: a config field), then its `validate`."""
    for name, option in method.config_options.items():
        if option.check is not None and hasattr(config, name):
            option.check(config, name)
    method.validate(config)


def per_layer(config, name: str, side: str) -> list[int]:
    """The per-layer head counts of option `name` (zeros when unset), for a method's `heads`."""
    return getattr(config, name) or [0] * getattr(config, f"{side}_layers")
