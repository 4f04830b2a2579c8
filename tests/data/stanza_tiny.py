"""A tiny English stanza pipeline built in seconds with stanza's own trainers (tokenize, mwt, lemma, pos, depparse:
a few steps on the hand-written treebank below, tiny dimensions, a 16-dimensional random-vector pretrain), saved in
stanza's layout with a resources.json, so that tests run the real ``stanza.Pipeline`` path through ``StanzaParser``.

Its parses are near random; tests check structure (one tree per text, spans, caching, pickling, CoNLL-U round trips),
never accuracy. ``benchmarks/data/stanza_english.py`` trains the real model the same way on UD English-EWT.
"""

from __future__ import annotations

import contextlib
import io
import logging
import random
from pathlib import Path

PACKAGE = "tiny"

#: hand-written UD trees (with two multi-word tokens, as EWT writes contractions); 1-based heads
_SENTENCES = [
    ("The dog sleeps .", [("The", "the", "DET", "DT", 2, "det"), ("dog", "dog", "NOUN", "NN", 3, "nsubj"),
                          ("sleeps", "sleep", "VERB", "VBZ", 0, "root"), (".", ".", "PUNCT", ".", 3, "punct")]),
    ("I don't like cats .", [("I", "I", "PRON", "PRP", 4, "nsubj"), ("don't", None, None, None, None, None),
                             ("do", "do", "AUX", "VBP", 4, "aux"), ("n't", "not", "PART", "RB", 4, "advmod"),
                             ("like", "like", "VERB", "VB", 0, "root"), ("cats", "cat", "NOUN", "NNS", 4, "obj"),
                             (".", ".", "PUNCT", ".", 4, "punct")]),
    ("A man reads a book .", [("A", "a", "DET", "DT", 2, "det"), ("man", "man", "NOUN", "NN", 3, "nsubj"),
                              ("reads", "read", "VERB", "VBZ", 0, "root"), ("a", "a", "DET", "DT", 5, "det"),
                              ("book", "book", "NOUN", "NN", 3, "obj"), (".", ".", "PUNCT", ".", 3, "punct")]),
    ("She can't swim in the lake .", [("She", "she", "PRON", "PRP", 4, "nsubj"), ("can't", None, None, None, None, None),
                                      ("ca", "can", "AUX", "MD", 4, "aux"), ("n't", "not", "PART", "RB", 4, "advmod"),
                                      ("swim", "swim", "VERB", "VB", 0, "root"), ("in", "in", "ADP", "IN", 7, "case"),
                                      ("the", "the", "DET", "DT", 7, "det"), ("lake", "lake", "NOUN", "NN", 4, "obl"),
                                      (".", ".", "PUNCT", ".", 4, "punct")]),
    ("Two children play football in the park .", [
        ("Two", "two", "NUM", "CD", 2, "nummod"), ("children", "child", "NOUN", "NNS", 3, "nsubj"),
        ("play", "play", "VERB", "VBP", 0, "root"), ("football", "football", "NOUN", "NN", 3, "obj"),
        ("in", "in", "ADP", "IN", 7, "case"), ("the", "the", "DET", "DT", 7, "det"),
        ("park", "park", "NOUN", "NN", 3, "obl"), (".", ".", "PUNCT", ".", 3, "punct")]),
    ("We walked home .", [("We", "we", "PRON", "PRP", 2, "nsubj"), ("walked", "walk", "VERB", "VBD", 0, "root"),
                          ("home", "home", "ADV", "RB", 2, "advmod"), (".", ".", "PUNCT", ".", 2, "punct")]),
]  # fmt: skip


def treebank_text() -> str:
    """The tiny treebank as CoNLL-U (one paragraph per sentence; ``SpaceAfter=No`` where the text has no space)."""
    blocks = []
    for k, (text, rows) in enumerate(_SENTENCES):
        lines = [f"# sent_id = tiny-{k}", f"# text = {text}"]
        pos, index = 0, 0
        mwt_left = 0
        for form, lemma, upos, xpos, head, deprel in rows:
            if lemma is None:  # a multi-word token line: its words follow
                start = text.index(form, pos)
                pos = start + len(form)
                space = "_" if pos < len(text) and text[pos] == " " else "SpaceAfter=No"
                lines.append(f"{index + 1}-{index + 2}\t{form}\t_\t_\t_\t_\t_\t_\t_\t{space}")
                mwt_left = 2
                continue
            index += 1
            if mwt_left:
                mwt_left -= 1
                misc = "_"
            else:
                start = text.index(form, pos)
                pos = start + len(form)
                misc = "_" if pos >= len(text) or text[pos] == " " else "SpaceAfter=No"
            lines.append(f"{index}\t{form}\t{lemma}\t{upos}\t{xpos}\t_\t{head}\t{deprel}\t_\t{misc}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n\n"


def _quiet(fn, *args):
    if __import__("os").environ.get("STANZA_TINY_VERBOSE"):
        return fn(*args)
    stanza_logger = logging.getLogger("stanza")
    level = stanza_logger.level
    stanza_logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return fn(*args)
    finally:
        stanza_logger.setLevel(level)


def build_tiny_model(output: str | Path) -> Path:
    """Train the tiny pipeline into ``output`` (stanza's layout + resources.json); returns ``output``."""
    import torch
    from stanza.models import lemmatizer, mwt_expander, parser, tagger, tokenizer
    from stanza.models.common.pretrain import Pretrain
    from stanza.utils.datasets.conllu_to_text import convert_text
    from stanza.utils.datasets.contract_mwt import contract_mwt
    from stanza.utils.datasets.prepare_tokenizer_data import main as prepare_tokenizer_data

    from hf_syntax_mt.data.stanza_resources import write_stanza_resources

    output = Path(output)
    work = output / "work"
    work.mkdir(parents=True, exist_ok=True)
    conllu = work / "tiny.conllu"
    conllu.write_text(treebank_text(), encoding="utf-8")
    txt, labels, mwt_json, contracted = (
        work / "tiny.txt",
        work / "tiny.toklabels",
        work / "tiny-mwt.json",
        work / "in.conllu",
    )
    convert_text(str(conllu), str(txt))
    _quiet(prepare_tokenizer_data, [str(txt), str(conllu), "-o", str(labels), "-m", str(mwt_json)])
    contract_mwt(str(conllu), str(contracted))

    rng = random.Random(0)
    words = sorted({w.lower() for _, rows in _SENTENCES for w, *_ in rows})
    vec = work / "tiny_vectors.txt"
    vec.write_text(f"{len(words)} 16\n" + "".join(w + " " + " ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(16)) + "\n"
                                               for w in words), encoding="utf-8")  # fmt: skip
    pretrain = output / "en" / "pretrain" / f"{PACKAGE}.pt"
    pretrain.parent.mkdir(parents=True, exist_ok=True)
    _quiet(Pretrain(str(pretrain), str(vec)).load)

    def save(proc: str) -> list[str]:
        (output / "en" / proc).mkdir(parents=True, exist_ok=True)
        return ["--lang", "en", "--shorthand", "en_tiny", "--save_dir", str(output / "en" / proc),
                "--save_name", f"{PACKAGE}.pt", "--seed", "1"]  # fmt: skip

    torch.manual_seed(0)
    small = ["--hidden_dim", "8", "--char_hidden_dim", "8", "--deep_biaff_hidden_dim", "8", "--word_emb_dim", "8",
             "--char_emb_dim", "8", "--tag_emb_dim", "4", "--transformed_dim", "8", "--num_layers", "1",
             "--train_file", str(conllu), "--eval_file", str(conllu), "--wordvec_pretrain_file", str(pretrain),
             "--max_steps", "2", "--eval_interval", "1", "--batch_size", "50"]  # fmt: skip
    _quiet(tokenizer.main, ["--mode", "train", "--txt_file", str(txt), "--label_file", str(labels),
                            "--mwt_json_file", str(mwt_json), "--dev_txt_file", str(txt), "--dev_label_file", str(labels),
                            "--dev_conll_gold", str(conllu), "--conll_file", str(work / "tok.conllu"),
                            "--emb_dim", "16", "--hidden_dim", "16", "--steps", "150", "--eval_steps", "150", "--lr0", "0.01", "--dropout", "0", "--unit_dropout", "0", "--tok_noise", "0",
                            *save("tokenize")])  # fmt: skip
    _quiet(mwt_expander.main, ["--mode", "train", "--train_file", str(conllu), "--eval_file", str(contracted),
                               "--gold_file", str(conllu), "--output_file", str(work / "mwt.conllu"),
                               "--num_epoch", "1", "--hidden_dim", "8", "--emb_dim", "8", *save("mwt")])  # fmt: skip
    _quiet(lemmatizer.main, ["--mode", "train", "--train_file", str(conllu), "--eval_file", str(conllu),
                             "--output_file", str(work / "lemma.conllu"), "--num_epoch", "1",
                             "--hidden_dim", "8", "--emb_dim", "8", "--pos_dim", "8", *save("lemma")[2:]])  # fmt: skip
    _quiet(tagger.main, ["--mode", "train", "--output_file", str(work / "pos.conllu"), *small, *save("pos")])
    _quiet(parser.main, ["--mode", "train", "--output_file", str(work / "dep.conllu"), *small,
                         "--deep_biaff_output_dim", "8", *save("depparse")])  # fmt: skip
    write_stanza_resources(output, lang="en", package=PACKAGE)
    return output
