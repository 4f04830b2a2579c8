"""The opus-mt layout of a model trained from scratch (`hf-syntax-mt train --tokenizer_layout opus-mt`): the layout
Helsinki-NLP's opus-mt models have and the tools built for them expect (CTranslate2's stock
`ct2-transformers-converter`, `MarianTokenizer`, SentencePiece-based servers such as CTranslate2's C++ ones).

- A joint SentencePiece unigram model, saved as ``source.spm`` and ``target.spm`` (the same model) with the
  ``vocab.json`` `MarianTokenizer` reads: ``</s>`` = 0, ``<unk>`` = 1, the pieces in SentencePiece's order, ``<pad>``
  last. Training uses the fast tokenizer of the same model (`fast_tokenizer`: offsets for the subword mapping), which
  tokenizes as `MarianTokenizer` does (tested on real text); the saved folder holds both, so `AutoTokenizer` gives
  the fast one and `MarianTokenizer.from_pretrained` the SentencePiece one.
- ``<pad>`` (the last id) is the decoder start, and its embedding row is zero and stays zero (`PadRowCallback`: the
  tied output projection would train it), as the stock converter assumes when it drops the row and starts the
  decoder from a zero embedding. Generation bans ``<pad>`` (``bad_words_ids``, as opus-mt's generation configs do).

SentencePiece normalizes nothing here (``normalization_rule_name="identity"``; the package's BPE tokenizer does not
either) but its whitespace handling: spaces (and a literal ``▁``) at the end dropped, spaces at the start dropped,
runs of spaces made one. `MarianTokenizer`'s ``>>xx<<`` language codes at a text's start are its own: the fast
tokenizer splits them into pieces (a model of this layout has no such codes).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import TrainerCallback

from ..errors import UserError
from .factory import _checked_texts, has_opus_mt_layout  # noqa: F401  (has_opus_mt_layout: importable from here)

logger = logging.getLogger(__name__)

#: the files of the SentencePiece `MarianTokenizer`, written beside the fast tokenizer's
OPUS_MT_FILES = ("source.spm", "target.spm", "vocab.json")
PAD, EOS, UNK = "<pad>", "</s>", "<unk>"


def train_opus_mt_tokenizer(texts: Iterable[str], output_dir: str | os.PathLike, vocab_size: int = 8000):
    """Train a joint SentencePiece unigram model on `texts` (the training sources and targets) and write the tokenizer
    folder of the opus-mt layout into `output_dir`: ``source.spm``, ``target.spm``, ``vocab.json`` and the fast
    tokenizer of the same model (``tokenizer.json``).

    Args:
        texts: the training sentences (sources and targets).
        output_dir: the folder to write (created; files of the same names are replaced).
        vocab_size: the vocabulary with ``<pad>`` (SentencePiece learns ``vocab_size - 1`` pieces, fewer on a corpus
            too small for them).

    Returns:
        The fast tokenizer loaded from `output_dir` (its ``name_or_path``, which `save_opus_mt_files` reads): ``</s>``
        = 0, ``<unk>`` = 1, ``<pad>`` last, ``</s>`` appended.
    """
    import sentencepiece as spm

    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 4:
        raise UserError(f"vocab_size={vocab_size!r}: the opus-mt layout's vocabulary needs at least 4 entries "
                        "(</s>, <unk>, a piece and <pad>); give a larger --vocab_size.")  # fmt: skip
    directory = Path(output_dir)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"output_dir {output_dir} is a file: give the folder to write the tokenizer into.")
    sentences = [t for t in _checked_texts(texts) if t.strip()]
    if not sentences:
        raise UserError("The training texts are all empty: the SentencePiece model of --tokenizer_layout opus-mt has "
                        "nothing to learn from; check the training files.")  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    prefix = directory / "sentencepiece"
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_prefix=str(prefix), model_type="unigram",
            vocab_size=vocab_size - 1, hard_vocab_limit=False, eos_id=0, unk_id=1, bos_id=-1, pad_id=-1,
            normalization_rule_name="identity", num_threads=max(1, min(os.cpu_count() or 1, 8)), minloglevel=2,
        )  # fmt: skip
    except RuntimeError as e:
        needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(e))
        if needed is None:
            raise
        raise UserError(f"vocab_size={vocab_size}: the training text has {int(needed.group(1)) - 2} characters "
                        f"SentencePiece must keep, which with </s>, <unk> and <pad> need a vocab_size of at least "
                        f"{int(needed.group(1)) + 1}; give a larger --vocab_size.") from None  # fmt: skip
    for name in ("source.spm", "target.spm"):
        shutil.copyfile(f"{prefix}.model", directory / name)
    for suffix in (".model", ".vocab"):
        Path(f"{prefix}{suffix}").unlink()
    tokenizer = fast_tokenizer(directory / "source.spm")
    (directory / "vocab.json").write_text(json.dumps(tokenizer.get_vocab(), ensure_ascii=False, indent=2) + "\n",
                                          encoding="utf-8")  # fmt: skip
    tokenizer.save_pretrained(directory)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory)


def fast_tokenizer(model_file):
    """The fast tokenizer of a SentencePiece unigram model whose ``</s>`` is 0 and ``<unk>`` 1 (`MarianTokenizer`'s
    tokenization, offsets included), ``<pad>`` added last and ``</s>`` appended to every sentence. The pipeline is
    transformers' `SpmConverter.build_tokenizer_from_spm_proto` for a model without a normalization rule, read with
    sentencepiece's own API (no protobuf); the Metaspace pre-tokenizer splits at word starts (`word_ids()` counts
    words; SentencePiece's pieces never cross one)."""
    import sentencepiece as spm
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    processor = spm.SentencePieceProcessor(model_file=str(model_file))
    if processor.id_to_piece(0) != EOS or processor.id_to_piece(1) != UNK:
        raise UserError(f"{model_file}: a SentencePiece model of the opus-mt layout has </s> = 0 and <unk> = 1, this "
                        f"one {processor.id_to_piece(0)!r} and {processor.id_to_piece(1)!r}.")  # fmt: skip
    pieces = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())]
    tok = Tokenizer(Unigram(pieces, unk_id=1, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Replace(Regex(r"\A +| +\z"), ""), normalizers.Replace(Regex(" {2,}"), " "),  # spaces only
        normalizers.Replace(" ", "▁"), normalizers.Replace(Regex(r"▁+\z"), ""),  # a trailing "▁" too, as SentencePiece
        normalizers.Replace(Regex(r"\A▁"), "▁▁"),  # SentencePiece's dummy prefix before a leading "▁"
    ])  # fmt: skip
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse(), decoders.Strip(content=" ", left=1)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in (EOS, UNK, PAD)])
    tok.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", pair=f"$A $B {EOS}",
                                                       special_tokens=[(EOS, 0)])  # fmt: skip
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, unk_token=UNK, pad_token=PAD,
                                   model_max_length=512)  # fmt: skip


def save_opus_mt_files(tokenizer, directory) -> bool:
    """Write ``source.spm``, ``target.spm`` and ``vocab.json`` into `directory` beside a saved `tokenizer` when the
    folder it was loaded from (``name_or_path``) holds them and its ``vocab.json`` is the tokenizer's vocabulary (a
    tokenizer with tokens added since would not match them). Returns whether they were written."""
    source = Path(str(getattr(tokenizer, "name_or_path", "") or ""))
    if not source.is_dir() or not all((source / name).is_file() for name in OPUS_MT_FILES):
        return False
    target = Path(directory)
    if source.resolve() == target.resolve():
        return True
    try:
        vocab = json.loads((source / "vocab.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    if vocab != tokenizer.get_vocab():
        logger.warning(f"{source}/vocab.json is not the tokenizer's vocabulary any more (tokens added?): "
                       f"{', '.join(OPUS_MT_FILES)} are not written to {target}")  # fmt: skip
        return False
    for name in OPUS_MT_FILES:
        shutil.copyfile(source / name, target / name)
    return True


def keeps_pad_row_zero(model) -> bool:
    """Whether training must keep `model`'s ``<pad>`` row zero: the opus-mt layout with a zero row now (a new model
    of the layout, a checkpoint of one, an opus-mt model; a row trained before is left to train)."""
    if not has_opus_mt_layout(getattr(model, "config", None)):
        return False
    try:  # a model of two (the bilingual-symmetry pair) has no one input embedding: transformers raises
        embeddings = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return False
    if embeddings is None:
        return False
    return not bool(embeddings.weight[model.config.pad_token_id].detach().any())


class PadRowCallback(TrainerCallback):
    """Keep the ``<pad>`` embedding row zero during training: a gradient hook zeroes its gradient (the tied output
    projection gives it one: the ``<pad>`` logit), so the optimizer never moves it and the gradient norm that
    clipping reads leaves it out. Added by `SyntaxMTTrainer` where `keeps_pad_row_zero`."""

    def __init__(self):
        self.handle = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        weight = model.get_input_embeddings().weight
        if weight.requires_grad and self.handle is None:
            pad = model.config.pad_token_id

            def zero_pad_row(grad):
                return grad.index_fill(0, torch.tensor([pad], device=grad.device), 0.0)

            self.handle = weight.register_hook(zero_pad_row)

    def on_train_end(self, args, state, control, **kwargs):
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
