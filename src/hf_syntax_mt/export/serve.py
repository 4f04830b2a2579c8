"""Translate with an exported directory: a CTranslate2 directory (`export_to_ctranslate2`) through
`ctranslate2.Translator` with the tokenizer copied beside it, as `generate` would (the same generation settings:
`generation_config.json`, `--num-beams`). A Marian directory (`save_marian`) needs nothing here: transformers loads
it and `translate` runs it as any model.

`hf-syntax-mt translate --model DIR` asks `exported_kind(DIR)` first and hands a CTranslate2 directory to
`commands.translate_ctranslate2`.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from ..errors import UserError
from .layout import EXPORT_INFO, _ctranslate2


def exported_kind(path) -> str | None:
    """`"ctranslate2"` for a CTranslate2 model directory (its `model.bin` or `hf_syntax_mt_export.json`, and a
    `config.json` without `model_type`, or one that cannot be read beside no `model.safetensors`: the CTranslate2
    folder's check names it), `"marian"` for a transformers Marian directory, else None."""
    try:
        directory = Path(path).expanduser()
    except RuntimeError:  # "~nobody/x": `_model_directory` names it
        return None
    ct2_files = (directory / "model.bin").is_file() or (directory / EXPORT_INFO).is_file()
    config_file = directory / "config.json"
    if not config_file.is_file():
        return "ctranslate2" if ct2_files and not (directory / "model.safetensors").exists() else None
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        config = None  # the folder's check names the damaged file
    if not isinstance(config, dict):
        return "ctranslate2" if ct2_files and not (directory / "model.safetensors").exists() else None
    if "model_type" not in config and ct2_files:
        return "ctranslate2"
    return "marian" if config.get("model_type") == "marian" else None


#: the `GenerationConfig` fields `CTranslate2Pipeline` applies (as `translate_batch` options or by construction of
#: the export); any other field set to a value other than its default is refused, not ignored
CTRANSLATE2_IMPLEMENTS = frozenset({
    "max_length", "max_new_tokens", "min_length", "min_new_tokens", "num_beams", "length_penalty", "early_stopping",
    "repetition_penalty", "no_repeat_ngram_size", "bad_words_ids", "suppress_tokens", "forced_bos_token_id",
    "forced_eos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "bos_token_id",
})  # fmt: skip


class CTranslate2Pipeline:
    """A CTranslate2 directory behind the interface `inference.translate_lines` uses: ``pipe(texts, batch_size=...,
    num_beams=...)`` -> ``[{"translation_text": str}]``, decoding as transformers' `generate` with the directory's
    `generation_config.json` (float32 weights give the same outputs).

    Args:
        directory: a directory `export_to_ctranslate2` wrote (it holds the tokenizer files).
        device: `"cpu"` or `"cuda"` (CTranslate2's names); `device_index` the GPU.
        threads: CPU threads of one translation (CTranslate2's `intra_threads`; 0: its default).
        compute_type: CTranslate2's `compute_type` (`"default"`: the type the directory was exported in).
    """

    def __init__(self, directory, device: str = "cpu", device_index: int = 0, threads: int = 0,
                 compute_type: str = "default"):  # fmt: skip
        from transformers import AutoTokenizer, GenerationConfig

        from ..model_files import check_ctranslate2_folder

        ctranslate2, _ = _ctranslate2()
        directory = Path(directory).expanduser()
        info = check_ctranslate2_folder(directory)  # every file read first: a damaged one is named, with the fix
        try:
            self.translator = ctranslate2.Translator(str(directory), device=device, device_index=device_index,
                                                     intra_threads=threads, compute_type=compute_type)  # fmt: skip
        except (RuntimeError, ValueError) as e:  # what the check cannot see (e.g. a spec this release cannot run)
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            if "compute type" in first.lower():  # the machine, not the folder
                raise UserError(f"{directory}: CTranslate2 cannot compute in {compute_type} on this {device} ({first}); "
                                "give another --compute-type (auto: the fastest this machine has)") from None  # fmt: skip
            if device != "cpu":  # a GPU that cannot run it is not the folder's fault
                raise
            raise UserError(f"{directory}: CTranslate2 {ctranslate2.__version__} cannot load {directory / 'model.bin'} "
                            f"({first}); export the model again with this release (hf-syntax-mt export --to "
                            "ctranslate2)") from None  # fmt: skip
        self.tokenizer = AutoTokenizer.from_pretrained(directory)
        # max_position_embeddings: the pipeline's source truncation and generate's output cap
        self.max_source_length = info.get("max_position_embeddings") or 512
        self.vocabulary = set(_vocabulary(directory))
        has_generation = (directory / "generation_config.json").is_file()
        generation_config = GenerationConfig.from_pretrained(directory) if has_generation else GenerationConfig()
        # what translate_lines and `resolve_generation` read of a model: a sentence-level model (no document
        # context), its positions (the length limit where the generation config sets none) and generation config
        config = SimpleNamespace(context_sentences=0, max_position_embeddings=self.max_source_length)
        self.model = SimpleNamespace(config=config, generation_config=generation_config, name_or_path=str(directory))
        self.device = SimpleNamespace(type=device, index=device_index)

    @property
    def generation_config(self):
        return self.model.generation_config

    def decoding_settings(self, **generate_kwargs):
        """The `GenerationConfig` a call with ``generate_kwargs`` decodes with (`resolve_generation`, as every engine):
        the directory's `generation_config.json`, the model's own length limit where it sets none. Raises a
        `UserError` naming each option CTranslate2 cannot apply (an allow-list, `CTRANSLATE2_IMPLEMENTS`)."""
        from ..generation_defaults import check_generation_options, resolve_generation

        resolved, other = resolve_generation(self.model, generate_kwargs, warn=False)
        if other:
            raise UserError(f"A CTranslate2 model takes no {sorted(other)} (only generation options); leave them "
                            "out.")  # fmt: skip
        check_generation_options(resolved, CTRANSLATE2_IMPLEMENTS, "CTranslate2",
                                 "translate with the model it was exported from")  # fmt: skip
        return resolved

    def options(self, **generate_kwargs) -> dict:
        """`translate_batch` options equal to `generate`'s settings (`decoding_settings`)."""
        g = self.decoding_settings(**generate_kwargs)
        # generate's max_length counts the decoder start token; CTranslate2 counts the tokens it decodes. A forced
        # end token (forced_eos_token_id) takes the last place, which CTranslate2 leaves out of its hypothesis.
        limit = g.max_new_tokens if g.max_new_tokens is not None else g.max_length - 1
        limit = min(limit, self.max_source_length)  # the decoder's positions (our generate caps there too)
        if g.forced_eos_token_id is not None:
            limit -= 1
        # beam search: CTranslate2 stops once beam_size * patience hypotheses are finished, as transformers'
        # early_stopping=True does with patience 1; "never" searches on to the length limit. transformers' default
        # (False: stop when no running beam looks better) has no CTranslate2 equivalent; patience 2 comes closest
        # (288 of 300 beam-4 outputs equal on tests/models/test_export_ctranslate2.py's model, patience 1: 263)
        patience = {True: 1, "never": limit + 1}.get(g.early_stopping, 2)
        options = dict(
            beam_size=g.num_beams, patience=patience, max_decoding_length=max(limit, 1),
            length_penalty=1.0 if g.length_penalty is None else g.length_penalty,
            repetition_penalty=g.repetition_penalty or 1.0, no_repeat_ngram_size=g.no_repeat_ngram_size or 0,
            min_decoding_length=g.min_new_tokens or max((g.min_length or 0) - 1, 0),
        )  # fmt: skip
        # a banned sequence with a token the CTranslate2 vocabulary dropped (opus-mt's <pad>) cannot be generated
        banned = [self.tokenizer.convert_ids_to_tokens(ids) for ids in g.bad_words_ids or []]
        banned += [[self.tokenizer.convert_ids_to_tokens(int(i))] for i in g.suppress_tokens or []]
        if banned := [b for b in banned if set(b) <= self.vocabulary]:
            options["suppress_sequences"] = banned
        return options

    def __call__(self, texts, batch_size: int = 16, **generate_kwargs):
        texts = [texts] if isinstance(texts, str) else list(texts)
        blank = [not t.strip() for t in texts]  # empty, as every engine gives it (CTranslate2 skips `</s>` alone)
        texts = [t for t, b in zip(texts, blank, strict=True) if not b]
        if not texts:
            return [{"translation_text": ""} for _ in blank]
        sources = [self.tokenizer.convert_ids_to_tokens(ids) for ids in self._encode(texts)]
        forced = self.decoding_settings(**generate_kwargs).forced_bos_token_id  # the multi-task translate token
        prefix = None if forced is None else [[self.tokenizer.convert_ids_to_tokens(forced)]] * len(texts)
        results = self.translator.translate_batch(sources, target_prefix=prefix, max_batch_size=batch_size,
                                                  **self.options(**generate_kwargs))  # fmt: skip
        ids = [self.tokenizer.convert_tokens_to_ids(r.hypotheses[0]) for r in results]
        decoded = iter(self.tokenizer.batch_decode(ids, skip_special_tokens=True))
        return [{"translation_text": "" if b else next(decoded)} for b in blank]

    def _encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids as the translation pipeline makes them (truncated to the model's positions, `</s>` last)."""
        return [self.tokenizer(t, truncation=True, max_length=self.max_source_length)["input_ids"] for t in texts]


def _vocabulary(directory: Path) -> list[str]:
    """The target tokens of a CTranslate2 directory (`shared_vocabulary` or `target_vocabulary`, JSON or text)."""
    from ..model_files import _ct2_vocabulary

    return _ct2_vocabulary(directory, str(directory))[1]
