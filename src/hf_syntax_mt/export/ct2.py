"""Export to a CTranslate2 model directory, through CTranslate2's own converter (`TransformersConverter`).

CTranslate2's Marian loader assumes opus-mt's layout: `<pad>` is the last token, dropped from the vocabulary, and the
decoder starts from a zero embedding. Models trained with this package put `<pad>` at id 0 and start the decoder from
it (`training/factory.py`), a row the tied output layer trains, so `MarianLayoutLoader`, a subclass of CTranslate2's
Marian loader, keeps that row and starts the decoder from the config's `decoder_start_token_id` wherever the stock
loader would not be exact; an opus-mt checkpoint (pad last, decoder start = pad, a zero pad row) converts exactly as
CTranslate2's own converter converts it. The loader is registered for `MarianConfig` during the conversion only.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path

from ..errors import UserError
from .layout import EXPORT_INFO, MIN_CTRANSLATE2, QUANTIZATIONS, _ctranslate2  # noqa: F401  (names of this module)
from .marian import check_exportable, check_output_directory, save_marian

#: files copied from the Marian directory, so that the CTranslate2 directory translates on its own
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json",
    "source.spm", "target.spm", "target_vocab.json", "generation_config.json",
)  # fmt: skip


def _loader_class(converters):
    class MarianLayoutLoader(converters.MarianMTLoader):
        """CTranslate2's Marian loader, exact for any pad position: where the stock loader's assumptions (pad last
        and dropped, decoder from a zero embedding) do not hold for the model, the pad row is kept and the decoder
        starts from `decoder_start_token_id`, as transformers' `generate` does."""

        keep_pad = False

        @staticmethod
        def opus_mt_layout(model) -> bool:
            """Pad last, the decoder starting from it, and a zero pad row: the stock loader is exact."""
            config = model.config
            pad = config.pad_token_id
            return (pad == config.vocab_size - 1 and config.decoder_start_token_id == pad
                    and not bool(model.get_input_embeddings().weight[pad].any()))  # fmt: skip

        def get_model_spec(self, model):
            decoder_vocab = getattr(model.config, "decoder_vocab_size", None)
            if decoder_vocab not in (None, model.config.vocab_size):
                raise UserError(f"This Marian model has separate source and target vocabularies (vocab_size="
                                f"{model.config.vocab_size}, decoder_vocab_size={decoder_vocab}), which the export to "
                                "CTranslate2 does not support.")  # fmt: skip
            self.keep_pad = not self.opus_mt_layout(model)
            model.config.normalize_before = False  # MarianMTLoader.get_model_spec's settings
            model.config.normalize_embedding = False
            spec = self.bart_model_spec(model)
            if not self.keep_pad:
                self._remove_pad_weights(spec)  # as MarianMTLoader.get_model_spec
            return spec

        # Copied from ctranslate2.converters.transformers.BartLoader.get_model_spec (4.x), changed: each stack is
        # specified with its own head count (upstream gives both `encoder_attention_heads`, which splits a decoder of
        # another head count wrongly). tests/models/test_export_equivalence.py checks the copy against the installed
        # release.
        def bart_model_spec(self, model):
            transformer_spec = converters.transformer_spec
            activation = model.config.activation_function
            if activation not in converters._SUPPORTED_ACTIVATIONS:
                raise UserError(f"activation_function={activation!r}: CTranslate2 has no such activation (it has "
                                f"{', '.join(sorted(converters._SUPPORTED_ACTIVATIONS))}); this model cannot be "
                                "exported to CTranslate2 (export it --to marian).")  # fmt: skip
            _SUPPORTED_ACTIVATIONS = converters._SUPPORTED_ACTIVATIONS  # noqa: N806 (upstream's name)

            def from_config(heads):
                return transformer_spec.TransformerSpec.from_config(
                    (model.config.encoder_layers, model.config.decoder_layers),
                    heads,
                    pre_norm=model.config.normalize_before,
                    activation=_SUPPORTED_ACTIVATIONS[model.config.activation_function],
                    layernorm_embedding=getattr(model.config, "normalize_embedding", True),
                )

            spec = transformer_spec.TransformerSpec(
                from_config(model.config.encoder_attention_heads).encoder,
                from_config(model.config.decoder_attention_heads).decoder,
            )

            self.set_encoder(spec.encoder, model.model.encoder)
            self.set_decoder(spec.decoder, model.model.decoder)
            self.set_linear(spec.decoder.projection, model.lm_head)

            final_logits_bias = getattr(model, "final_logits_bias", None)
            if final_logits_bias is not None and final_logits_bias.nonzero().numel() != 0:
                spec.decoder.projection.bias = final_logits_bias.squeeze()

            return spec

        def set_config(self, config, model, tokenizer):
            super().set_config(config, model, tokenizer)
            if self.keep_pad:  # the decoder starts from the config's start token (our layout: <pad>, id 0)
                config.decoder_start_token = tokenizer.convert_ids_to_tokens(model.config.decoder_start_token_id)

        def set_decoder(self, spec, decoder):
            if self.keep_pad:
                converters.BartLoader.set_decoder(self, spec, decoder)
            else:
                super().set_decoder(spec, decoder)

        def get_vocabulary(self, model, tokenizer):
            if not self.keep_pad:
                return super().get_vocabulary(model, tokenizer)
            tokens = converters.BartLoader.get_vocabulary(self, model, tokenizer)
            if len(tokens) != model.config.vocab_size:
                raise UserError(f"The tokenizer has {len(tokens)} tokens but the model's vocab_size is "
                                f"{model.config.vocab_size}: CTranslate2 needs one token per embedding row.")  # fmt: skip
            return tokens

    return MarianLayoutLoader


@contextlib.contextmanager
def _registered(converters, loader):
    """`loader` as CTranslate2's loader of `MarianConfig` inside the block; the previous one is put back after."""
    registry = converters._MODEL_LOADERS
    previous = registry.get("MarianConfig")
    registry["MarianConfig"] = loader
    try:
        yield
    finally:
        if previous is None:
            registry.pop("MarianConfig", None)
        else:
            registry["MarianConfig"] = previous


def export_to_ctranslate2(model_dir, output_dir, quantization: str = "float32") -> Path:
    """Convert a model directory to a CTranslate2 model directory with CTranslate2's own converter.

    Args:
        model_dir: a transformers `MarianMTModel` directory (`save_marian`'s, or an opus-mt checkpoint) or a
            `SyntaxMTForConditionalGeneration` directory whose config `check_exportable` passes (exported to Marian
            first, in a temporary directory).
        output_dir: a new or empty directory.
        quantization: the weight type, one of `QUANTIZATIONS` (CTranslate2's names; float32 keeps `generate`'s
            outputs).

    Returns:
        The directory: CTranslate2's `model.bin`, `config.json` and vocabulary, the tokenizer files and
        `generation_config.json` of the model (so that it translates on its own), and `hf_syntax_mt_export.json`.
    """
    if quantization not in QUANTIZATIONS:
        raise UserError(f"quantization={quantization!r} is not a CTranslate2 weight type: use one of "
                        f"{', '.join(QUANTIZATIONS)}.")  # fmt: skip
    ctranslate2, converters = _ctranslate2()
    from ..model_files import check_model_folder

    source = Path(model_dir).expanduser()
    if not source.is_dir():
        raise UserError(f"{model_dir}: no such model directory.")
    out = check_output_directory(output_dir, "output_dir", source=source)
    model_type = check_model_folder(source, f"model_dir {model_dir}").get("model_type")
    with tempfile.TemporaryDirectory(prefix="hf-syntax-mt-export-") as tmp:
        marian_dir = source
        if model_type != "marian":
            marian_dir = Path(tmp) / "marian"
            _export_directory_to_marian(source, marian_dir, model_type)
        loader = _loader_class(converters)()
        with _registered(converters, loader):
            converters.TransformersConverter(str(marian_dir)).convert(
                str(out), quantization=quantization, force=out.exists()
            )
        for name in TOKENIZER_FILES:
            if (marian_dir / name).is_file():
                shutil.copy2(marian_dir / name, out / name)
        max_positions = json.loads((marian_dir / "config.json").read_text(encoding="utf-8")).get(
            "max_position_embeddings"
        )
    from .. import __version__

    info = {
        "format": "ctranslate2", "ctranslate2_version": ctranslate2.__version__, "quantization": quantization,
        "layout": "pad kept, decoder starts from decoder_start_token_id" if loader.keep_pad else "opus-mt",
        "exported_from": model_type, "max_position_embeddings": max_positions, "hf_syntax_mt_version": __version__,
    }  # fmt: skip
    (out / EXPORT_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    from .ct2_usage import write_usage

    write_usage(out)  # README.md: the translate_batch call and the decoding settings CTranslate2 does not read
    return out


def _export_directory_to_marian(source: Path, target: Path, model_type) -> None:
    """`save_marian` of the model (and tokenizer) saved in `source`."""
    from transformers import AutoConfig, AutoTokenizer

    from ..modeling_syntax_mt import SyntaxMTForConditionalGeneration

    if model_type != "syntax_mt":
        raise UserError(f"{source} holds a {model_type!r} model: the export takes a syntax_mt model (hf-syntax-mt's) "
                        "or a marian one (transformers' MarianMTModel).")  # fmt: skip
    check_exportable(AutoConfig.from_pretrained(source))  # before loading the weights
    model = SyntaxMTForConditionalGeneration.from_pretrained(source)
    save_marian(model, target, AutoTokenizer.from_pretrained(source))
