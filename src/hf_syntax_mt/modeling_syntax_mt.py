"""The Marian spine of the syntax-aware models: attention, encoder and decoder layers, encoder, decoder, model and
conditional generation, with every method plugged in through the registry (`hf_syntax_mt.methods`).

The models subclass Marian and keep its module names, so every weight of a `MarianMTModel` checkpoint loads into
them ("retrofit"). An attention module asks the registry which heads each method takes; those heads run through one
eager score path where the methods' hooks apply (query -> scores -> logits -> probabilities -> record), and the
other heads of the same layer keep the fast attention kernel (SDPA by default); the two are concatenated before
`out_proj`. Method inputs travel as keyword arguments, as transformers v5 passes attention kwargs; the loss is the
cross-entropy plus the weighted auxiliary losses of the active methods, read from one `AttentionRecord`.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin
from transformers import initialization as init
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqModelOutput
from transformers.models.marian.modeling_marian import (
    MarianDecoder,
    MarianEncoder,
    MarianModel,
    MarianMTModel,
    MarianPreTrainedModel,
    shift_tokens_right,
)
from transformers.utils import can_return_tuple, logging
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .compat import (
    checkpoint_keyword_tensors,
    legacy_cache_warning,
    legacy_checkpointing,
    refuse_unknown_keywords,
    show_in_signature,
)
from .configuration_syntax_mt import SyntaxMTConfig
from .errors import UserError
from .generation_defaults import fill_generation_defaults, resolve_generation
from .methods.records import AttentionRecord, ForwardInputs  # the methods reach the spine through the registry
from .methods.registry import (
    active_methods,
    document_settings,
    input_names,
    on_change,
    registered,
    supervision_names,
)
from .modeling_layers import CACHE, SyntaxMTAttention, SyntaxMTDecoderLayer, SyntaxMTEncoderLayer, pop_cache
from .modeling_outputs import AUXILIARY_LOSSES, SyntaxMTEncoderOutput, SyntaxMTSeq2SeqLMOutput

logger = logging.get_logger(__name__)
#: the loss terms that are fields of `SyntaxMTSeq2SeqLMOutput` (another method's term is added by its name)
LOSS_FIELDS = ("translation_loss", *AUXILIARY_LOSSES)


class SyntaxMTPreTrainedModel(MarianPreTrainedModel):
    config_class = SyntaxMTConfig
    config: SyntaxMTConfig
    # Every Marian weight keeps its name, so Marian checkpoints load as they are; the parameters the methods add
    # (bi-affine U, feature embeddings, alignment biases, ...) are initialised by their `init_weights`.
    _no_split_modules = ["SyntaxMTEncoderLayer", "SyntaxMTDecoderLayer"]
    # The attention implementations that work, with every method (tests/models/test_attention_implementations.py):
    # eager, sdpa and flex_attention (the method heads read any mask format, `attention_functions.additive_mask`). Not
    # flash attention, which Marian declares: transformers' flash path unpads the cross-attention's queries with the
    # source's padding mask (transformers issue #35032), so a padded source gives wrong outputs with any model.
    _supports_flash_attn = False

    def _flash_attn_can_dispatch(self, flash_attn_version: int, *args, **kwargs):
        """transformers' check of `attn_implementation="flash_attention_*"`: refused (see `_supports_flash_attn`)."""
        raise UserError(
            f"attn_implementation='flash_attention_{flash_attn_version}' is not supported: transformers' flash "
            "attention path gives wrong cross-attention outputs for padded sources in encoder-decoder models "
            "(transformers issue #35032); use attn_implementation='sdpa' (the default) or 'flex_attention'."
        )

    def __init__(self, config: SyntaxMTConfig, *args, **kwargs):
        config.check_token_ids()  # before Marian's embeddings, whose error names no option
        super().__init__(config, *args, **kwargs)

    def _set_gradient_checkpointing(self, *args, **kwargs):
        """transformers' own, with every layer's checkpoint also taking the tensors that reach it as keyword
        arguments (what the methods' sublayers read, `Method.encoder_states`): `compat.checkpoint_keyword_tensors`."""
        if kwargs.get("gradient_checkpointing_func") is not None:
            kwargs["gradient_checkpointing_func"] = checkpoint_keyword_tensors(kwargs["gradient_checkpointing_func"])
        return super()._set_gradient_checkpointing(*args, **kwargs)

    def _init_weights(self, module):
        super()._init_weights(module)
        if hasattr(module, "xavier_gain") and getattr(self.config, "attention_init", "normal") == "xavier":
            # fairseq MultiheadAttention.reset_parameters: larger initial scores (e.g. for PASCAL's Gaussian to scale)
            init.xavier_uniform_(module.weight, gain=module.xavier_gain)
        for method in registered():
            method.init_weights(module, self.config)

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedModel.save_pretrained` plus self-contained remote code: a flat copy of the modules the config,
        model and pipeline classes need (`remote_code.attach_remote_code`), declared in `auto_map` (Auto classes with
        `trust_remote_code=True`) and `custom_pipelines`, which routes `pipeline("translation", model=DIR,
        trust_remote_code=True)` to `SyntaxTranslationPipeline`. The directory loads without `hf_syntax_mt`
        installed. Raises `RemoteCodeError` (before writing anything) if a needed module cannot be bundled."""
        from .remote_code import attach_remote_code

        bundle = attach_remote_code(self, [SyntaxMTModel, SyntaxMTForConditionalGeneration])
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            bundle.write(save_directory)


class SyntaxMTEncoder(SyntaxMTPreTrainedModel, MarianEncoder):
    """Marian encoder; the registered methods add their inputs (`hf_syntax_mt.methods.input_names()`, each aligned
    with what its `Column` says: `input_ids`, the source's words, or another sequence of the method's own) as keyword
    arguments, their embeddings (`Method.embed`), their attention inputs (`Method.prepare`) and the states their
    sublayers read, with the encoder output fields the decoder reads (`Method.encoder_states`, e.g. the keys and values
    of an encoded document context)."""

    _can_record_outputs = {"hidden_states": SyntaxMTEncoderLayer, "attentions": SyntaxMTAttention}

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)
        self.layers = nn.ModuleList([SyntaxMTEncoderLayer(config, i) for i in range(config.encoder_layers)])
        for method in registered():
            method.build_encoder(self, config)  # e.g. feature embeddings, the context encoder
        self.post_init()

    def embed(self, input_ids, inputs: dict[str, torch.Tensor | None]) -> torch.Tensor:
        """Token embeddings (scaled as Marian) combined with the methods' input embeddings, `(B, S, D)`."""
        embeds = self.embed_tokens(input_ids) * self.embed_scale  # (B, S, D)
        for method in active_methods(self.config):
            embeds = method.embed(self, input_ids, embeds, inputs)
        return embeds

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs,
    ) -> SyntaxMTEncoderOutput:
        # the methods' inputs; what several methods derive from the same inputs is computed once (`shared`)
        inputs = ForwardInputs({name: kwargs.pop(name) for name in input_names() if name in kwargs})
        for name in supervision_names():  # training targets: read by the losses, never by the encoder
            kwargs.pop(name, None)
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise UserError("You must specify exactly one of input_ids or inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.embed(input_ids, inputs)
        seq_len = inputs_embeds.shape[1]
        if seq_len > self.max_source_positions:
            raise UserError(
                f"The input has {seq_len} tokens but max_position_embeddings={self.max_source_positions}: truncate "
                "the source (`SyntaxMTPreprocessor(max_source_length=...)` or `tokenizer(..., truncation=True)`)."
            )
        # what the attention hooks read, checked and computed once per forward; the layers hand it to the attention
        # apart from the kernel's kwargs (no method tensor reaches the kernel)
        attention_inputs = {}
        for method in active_methods(self.config):
            attention_inputs.update(method.prepare(self.config, inputs, inputs_embeds.shape[:2], attention_mask))

        layer_states, output_fields = {}, {}  # what the methods' sublayers read; what the decoder reads
        for method in registered():
            states, fields = method.encoder_states(self, self.config, inputs, inputs_embeds.shape[0])
            layer_states.update(states)
            output_fields.update(fields)
        if layer_states:
            kwargs["layer_states"] = layer_states

        hidden_states = inputs_embeds + self.embed_positions(inputs_embeds.shape[:-1])  # (B, S, D)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask
        )
        for layer in self.layers:
            if self.training and self.layerdrop > 0.0 and torch.rand([]) < self.layerdrop:
                continue
            hidden_states = layer(hidden_states, mask, method_inputs=attention_inputs, **kwargs)
        return SyntaxMTEncoderOutput(last_hidden_state=hidden_states, **output_fields)


class SyntaxMTDecoder(SyntaxMTPreTrainedModel, MarianDecoder):
    """Marian decoder whose attention modules return probabilities under any kernel."""

    _can_record_outputs = {
        "hidden_states": SyntaxMTDecoderLayer,
        "attentions": OutputRecorder(SyntaxMTAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(SyntaxMTAttention, index=1, layer_name="encoder_attn"),
    }

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)
        self.layers = nn.ModuleList([SyntaxMTDecoderLayer(config, i) for i in range(config.decoder_layers)])
        self.post_init()


class SyntaxMTModel(SyntaxMTPreTrainedModel, MarianModel):
    """The bare syntax-aware Marian encoder-decoder (no LM head)."""

    _keys_to_ignore_on_load_missing = MarianModel._keys_to_ignore_on_load_missing

    def __init__(self, config: SyntaxMTConfig):
        checkpointing = getattr(config, "gradient_checkpointing", False)  # Marian's __init__ consumes the flag
        super().__init__(config)  # MarianModel: shared embeddings and their tying
        self.encoder = SyntaxMTEncoder(config)
        self.decoder = SyntaxMTDecoder(config)
        self.post_init()
        legacy_checkpointing(self, checkpointing)

    def _decoder_states(self, encoder_outputs) -> dict:
        """What the methods' sublayers read in the decoder layers (`Method.decoder_states`, from the encoder output
        fields their `encoder_states` gave), as the layers' `layer_states` keyword argument."""
        states = {}
        for method in active_methods(self.config):
            states.update(method.decoder_states(self.config, encoder_outputs))
        return {"layer_states": states} if states else {}

    @can_return_tuple  # `return_dict=False` (argument or config): a tuple, as Marian's
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values=None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        r"""
        Method inputs (`hf_syntax_mt.methods.input_names()`, shown in this signature: each declared by the method that
        reads it, with its shape and meaning in the method's module of `hf_syntax_mt.methods`) are keyword arguments
        read by the encoder; they are ignored when `encoder_outputs` is given (which carry what the encoder made of
        them, e.g. an encoded document context).

        attention_record (`AttentionRecord`, *optional*, in `kwargs`):
            Filled with what the auxiliary losses read (the translation model passes it).
        """
        legacy_cache_warning(type(self).__name__, past_key_values, CACHE)
        past_key_values = pop_cache(past_key_values, kwargs)
        method_inputs = {name: kwargs.pop(name) for name in (*input_names(), *supervision_names()) if name in kwargs}
        refuse_unknown_keywords(type(self).forward, kwargs, ())  # a typo is not silently dropped
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                return_dict=True,  # read as a dict below; `can_return_tuple` makes the tuple
                **method_inputs,
                **kwargs,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                last_hidden_state=encoder_outputs[0],
                hidden_states=encoder_outputs[1] if len(encoder_outputs) > 1 else None,
                attentions=encoder_outputs[2] if len(encoder_outputs) > 2 else None,
            )
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs[0],
            encoder_attention_mask=attention_mask,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **{CACHE: past_key_values},
            **self._decoder_states(encoder_outputs),
            return_dict=True,
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            **{CACHE: getattr(decoder_outputs, CACHE)},
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


class SyntaxMTForConditionalGeneration(SyntaxMTPreTrainedModel, MarianMTModel, GenerationMixin):
    """Syntax-aware Marian translation model: Marian with the registered methods plugged in (`hf_syntax_mt.methods`).

    Load a Marian checkpoint with the options of the methods to add (each method's module and docs page list its
    options; the parameters a method adds are initialised, every Marian weight is kept)::

        model = SyntaxMTForConditionalGeneration.from_pretrained(marian_dir, **method_options)

    The loss is the label-smoothed cross-entropy L_t plus each term of each active method times its weight::

        L_t + sum over active methods m, terms n of m: weight_n * L_n        (`Method.losses`, `Method.loss_weights`)

    Each term is an output field (`SyntaxMTSeq2SeqLMOutput`, unweighted there; `AUXILIARY_LOSSES` for the built-in
    methods, a method registered outside the package under its own name). Each term is summed over tokens and divided
    by the number of target tokens (the Trainer's `num_items_in_batch`), as fairseq normalises every term of a
    criterion, so gradient accumulation stays exact.
    """

    # The Trainer passes `num_items_in_batch` (target tokens over all accumulated micro-batches) and the loss is
    # normalised by it, so gradient accumulation gives exactly the gradient of the full batch.
    accepts_loss_kwargs = True
    _keys_to_ignore_on_load_missing = MarianMTModel._keys_to_ignore_on_load_missing
    _keys_to_ignore_on_save = MarianMTModel._keys_to_ignore_on_save

    def __init__(self, config: SyntaxMTConfig):
        checkpointing = getattr(config, "gradient_checkpointing", False)
        super().__init__(config)  # MarianMTModel: LM head, final_logits_bias and weight tying
        self.model = SyntaxMTModel(config)
        for method in registered():
            method.build_model(self, config)  # a method's own modules on the translation model
        self.record_cross_layers: list[int] = []  # extra cross-attention layers to keep (`recording_alignment`)
        self.last_attention_record: AttentionRecord | None = None
        self.post_init()
        fill_generation_defaults(self)  # a beam size however it is built (the length limit: at generate())
        legacy_checkpointing(self, checkpointing)

    def document_parameter_names(self) -> list[str]:
        """Names of theta_d, the document-level parameters: those a method adds to read a sentence's document
        (`Method.document_level`)."""
        return [name for name, _ in self.named_parameters() if self._document_level(name)]

    def _document_level(self, name: str) -> bool:
        return any(method.document_level(name) for method in registered())

    def freeze_sentence_level_parameters(self) -> list[str]:
        """Step 2 of two-step document-level training (Zhang et al. 2018, Section 2.4): keep theta_s, every
        sentence-level parameter, fixed and train only theta_d (`document_parameter_names`). Sets `requires_grad`
        accordingly (the Trainer's optimizer then holds theta_d alone) and returns the names of the trainable
        parameters.

        Typical use, from a sentence-level model (ours or an opus-mt-style Marian checkpoint) loaded with the option
        of a method that reads documents (`Method.document_option`; `methods.registry.document_settings`)::

            model = SyntaxMTForConditionalGeneration.from_pretrained(sentence_dir, **document_options)
            model.freeze_sentence_level_parameters()

        Raises:
            UserError: the model has no document-level parameters (its message names the option that adds them).
        """
        if not self.document_parameter_names():
            raise UserError(
                f"This model has no document-level parameters ({document_settings(self.config)}): load it with "
                f"`from_pretrained(..., {document_settings(self.config, 2)})` before freezing the sentence-level ones."
            )
        trainable = []
        for name, parameter in self.named_parameters():
            parameter.requires_grad_(self._document_level(name))
            if parameter.requires_grad:
                trainable.append(name)
        return trainable

    def translate_document(self, sentences: list[str], tokenizer, parser=None, **generate_kwargs) -> list[dict]:
        """Translate one document (a list of source sentences, in order), each sentence with as many previous
        sentences as the model's methods read (`hf_syntax_mt.methods.registry.document_window`); one
        ``{"translation_text": str}`` per sentence, as the pipeline returns (see
        `SyntaxTranslationPipeline.translate_document`). `parser` defaults to `config.source_parser` (a model whose
        methods read the source parse parses the input)."""
        from .inference import translate_document

        return translate_document(self, sentences, tokenizer, parser=parser, **generate_kwargs)

    def align(self, input_ids, labels, **kwargs):
        """Source-target alignments from a decoder layer's cross-attention: see `hf_syntax_mt.alignment.align`."""
        from .alignment.cross_attention import align

        return align(self, input_ids, labels, **kwargs)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values=None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> SyntaxMTSeq2SeqLMOutput:
        r"""
        Method inputs and training-only supervision (`hf_syntax_mt.methods.input_names()` and
        `supervision_names()`, shown in this signature; a target-side column is given per *label* position, shifted
        onto the decoder inputs like `labels`) are keyword arguments; see [`SyntaxMTModel.forward`] and each method's
        module in `hf_syntax_mt.methods`.

        labels (`torch.LongTensor` of shape `(batch_size, target_length)`, *optional*):
            Target token ids, -100 for ignored positions; the loss uses `config.label_smoothing`.
        num_items_in_batch (`int`, *optional*):
            Number of target tokens in the whole (accumulated) batch; the Trainer passes it. Every loss term is then
            summed and divided by it instead of averaged over this micro-batch.
        """
        legacy_cache_warning(type(self).__name__, past_key_values, CACHE)
        past_key_values = pop_cache(past_key_values, kwargs)
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = shift_tokens_right(
                    labels, self.config.pad_token_id, self.config.decoder_start_token_id
                )
        config = self.config
        supervision = {name: kwargs.pop(name) for name in supervision_names() if name in kwargs}
        refuse_unknown_keywords(type(self).forward, kwargs, input_names())  # a typo is not silently dropped
        if self.training and labels is not None and not getattr(self, "_supervision_checked", False):
            from .methods.supervision import check_batch  # the first training step: warn once what is missing

            check_batch(self, {n for n, v in {**supervision, **kwargs}.items() if v is not None}, labels)
        batch = {"labels": labels, "attention_mask": attention_mask, **supervision}
        # a decoding step (no labels, no supervision) records nothing: skip asking the methods
        active = active_methods(config) if labels is not None or supervision or self.record_cross_layers else []
        record = self._attention_record(active, batch, decoding=past_key_values is not None)
        outputs = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            encoder_outputs=encoder_outputs,
            decoder_attention_mask=decoder_attention_mask,
            **{CACHE: past_key_values},
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **({} if record is None else {"attention_record": record}),
            return_dict=True,
            **kwargs,
        )
        if self.record_cross_layers:
            self.last_attention_record = record  # read by `recording_alignment`, which clears it
        logits = self.lm_head(outputs[0]) + self.final_logits_bias  # (B, T, V)
        loss, terms = self._objective(logits, active, record, batch, outputs, num_items_in_batch)
        output = SyntaxMTSeq2SeqLMOutput(
            loss=loss,
            logits=logits,
            **{CACHE: getattr(outputs, CACHE)},
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
            **{name: terms.pop(name) for name in LOSS_FIELDS if name in terms},
        )
        for name, value in terms.items():  # the losses of methods registered outside the package
            output[name] = value
        return output

    def _attention_record(self, active: list, batch: dict, decoding: bool) -> AttentionRecord | None:
        """What this forward keeps of the attention (None: nothing): the heads an active method's loss reads (never
        at a cached decoding step) and the cross-attention layers a method or `recording_alignment` asks for."""
        record_heads, cross_layers = False, set(self.record_cross_layers)
        for method in active:
            heads, cross = method.wants_record(self, batch)
            record_heads |= heads and not decoding
            cross_layers |= cross
        return AttentionRecord(record_heads, cross_layers) if record_heads or cross_layers else None

    def _objective(self, logits, active, record, batch, outputs, num_items_in_batch):
        """The loss and its terms: ``(loss, terms)``, ``terms`` holding ``translation_loss`` (L_t, the label-smoothed
        cross-entropy) and each active method's term, unweighted (`Method.loss`, run for every active method that
        declares `losses`, with the attention record when one is kept, else an empty one: a loss that reads no
        attention makes no head store it); the loss is L_t plus each term times its weight (`Method.loss_weights`).
        Every term is summed over tokens and divided by `num_items_in_batch` (else this batch's target tokens).
        Without labels the loss is None and a method's term, if any, is left summed."""
        labels, config = batch["labels"], self.config
        loss, terms = None, {}
        if labels is not None:
            translation_loss = nn.functional.cross_entropy(
                logits.view(-1, logits.shape[-1]).float(),
                labels.view(-1).to(logits.device),
                ignore_index=-100,
                label_smoothing=float(config.label_smoothing),
                reduction="sum",
            )
            normalizer = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum().clamp(min=1)
            loss = terms["translation_loss"] = translation_loss / normalizer
        aux: dict[str, torch.Tensor] = {}
        for method in active:  # summed over tokens, unweighted
            if method.losses:
                aux.update(method.loss(self, record if record is not None else AttentionRecord(), batch, outputs))
        weights = {name: w for method in active for name, w in method.loss_weights(config).items()}
        if labels is not None and aux:
            aux = {name: value / normalizer for name, value in aux.items()}
            loss = loss + sum(weights[name] * value for name, value in aux.items())  # Eq. 6 and each method's term
        return loss, {**terms, **aux}

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate` with the settings `generation_defaults.resolve_generation` gives (the one source
        every engine reads): a multi-task model starts every output with its `"translate"` task token unless
        `forced_bos_token_id` or `decoder_input_ids` say otherwise; the model's own beam size and length limit where
        nothing sets them, and a length capped where the decoder would run out of positions (with a warning)."""
        generation_config, inputs = resolve_generation(self, kwargs)
        return super().generate(*args, generation_config=generation_config, **inputs)


__all__ = ["SyntaxMTForConditionalGeneration", "SyntaxMTModel", "SyntaxMTPreTrainedModel"]


def _refresh_forward_signatures() -> None:
    """The registered methods' inputs in the models' `forward` signatures (again whenever a method registers)."""
    for cls in (SyntaxMTModel, SyntaxMTForConditionalGeneration):
        show_in_signature(cls.forward, (*input_names(), *supervision_names()), CACHE)


on_change(_refresh_forward_signatures)
