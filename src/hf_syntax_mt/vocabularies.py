"""Fixed vocabularies of the linguistic input features (Sennrich & Haddow 2016), shared by the model configuration
(`configuration_syntax_mt`, which validates `input_features`) and the data side (`data.subwords`, which turns a parse
into feature ids). Dependency-free, so the data package needs nothing from the model side.

Id 0 = none (special / padding / unknown); a tag's id is its index here plus 1. Dependency relations are reduced to
their universal part ("nmod:poss" -> "nmod").
"""

__all__ = ["DEPRELS", "INPUT_FEATURES", "SUBWORD_TAGS", "UPOS_TAGS"]

UPOS_TAGS = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT", "SCONJ",
    "SYM", "VERB", "X",
)  # fmt: skip
DEPRELS = (
    "acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf", "compound", "conj", "cop",
    "csubj", "dep", "det", "discourse", "dislocated", "expl", "fixed", "flat", "goeswith", "iobj", "list", "mark",
    "nmod", "nsubj", "nummod", "obj", "obl", "orphan", "parataxis", "punct", "reparandum", "root", "vocative",
    "xcomp",
)  # fmt: skip
SUBWORD_TAGS = ("B", "I", "E", "O")  # begin / inside / end of a split word, O = a word of one subword
INPUT_FEATURES = {"pos": UPOS_TAGS, "deprel": DEPRELS, "subword_tag": SUBWORD_TAGS}
