"""Shared fixtures. Data-preparation fixtures are prefixed ``data_``."""

from __future__ import annotations

import collections
import json

import pytest

DATA_CORPUS = [
    "Le chat mange du poisson au marché.",
    "Un homme regarde l'herbe verte devant la maison.",
    "Les enfants jouent dans le parc avec un ballon rouge.",
    "Il fait beau aujourd'hui et demain il pleuvra.",
    "Nous avons vu des films de médecins et scientifiques fous.",
    "Une femme en robe bleue marche sur le trottoir.",
    "Deux chiens courent dans la neige près du lac.",
    "The cat eats fish at the market near the river.",
]


@pytest.fixture(scope="session")
def data_corpus() -> list[str]:
    """A few French (and one English) sentences used to train the tiny tokenizers."""
    return list(DATA_CORPUS)


@pytest.fixture(scope="session")
def data_marian_tokenizer(tmp_path_factory):
    """A sentencepiece ``MarianTokenizer`` (unigram, ~120 pieces) trained on the fly; ``</s>`` = 0, ``<pad>`` last."""
    import sentencepiece as spm
    from transformers import MarianTokenizer

    d = tmp_path_factory.mktemp("data_marian")
    (d / "corpus.txt").write_text("\n".join(DATA_CORPUS * 10), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(d / "corpus.txt"),
        model_prefix=str(d / "spm"),
        vocab_size=120,
        model_type="unigram",
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_file=str(d / "spm.model"))
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        if piece not in vocab and piece not in ("<s>", "<unk>", "</s>"):
            vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    (d / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return MarianTokenizer(
        source_spm=str(d / "spm.model"), target_spm=str(d / "spm.model"), vocab=str(d / "vocab.json")
    )


@pytest.fixture(scope="session")
def data_fast_tokenizer():
    """A fast BPE tokenizer (Metaspace pre-tokenizer, ``</s>`` appended like Marian) trained on the fly."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=["</s>", "<unk>", "<pad>"])
    tok.train_from_iterator(DATA_CORPUS * 5, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` need a CUDA device: where torch sees none they are skipped, with the reason."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(
        reason="needs a CUDA device (torch.cuda.is_available() is False); run scripts/gpu_check.sh on one"
    )
    for item in gpu_items:
        item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    """Every run that skipped tests ends with one line per reason and how many it skipped (issue 56): each reason says
    what to install or provide (tests/needs.py), e.g. a CUDA device, the dev extra, ../shared/data."""
    counts = collections.Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        counts[reason.removeprefix("Skipped: ")] += 1
    if counts:
        terminalreporter.section(f"{sum(counts.values())} skipped, by reason")
        for reason, n in counts.most_common():
            terminalreporter.write_line(f"{n:5d}  {reason}")


@pytest.fixture(scope="session", autouse=True)
def _spacy_pipelines_loaded_once():
    """Each spaCy pipeline is loaded once per test process (an xdist worker): every parser, pipeline and reference in
    the tests that names the same model and options shares it, instead of paying `spacy.load` (seconds) each time.
    spaCy is imported only when a test first loads a pipeline."""
    from hf_syntax_mt.data import parsers

    loaded: dict = {}
    original = parsers.SpacyParser._load

    def load_once(self):
        if self._nlp is None:
            key = (self.model, tuple(self.exclude or ()), repr(sorted(self.load_kwargs.items())))
            if key not in loaded:
                loaded[key] = original(self)
            self._nlp = loaded[key]
        return self._nlp

    parsers.SpacyParser._load = load_once
    yield
    parsers.SpacyParser._load = original
