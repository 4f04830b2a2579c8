"""Fixed vocabularies of the linguistic input features (no dependency: the data and model sides both read them)."""

# Fixed vocabularies of the linguistic input features (Sennrich & Haddow 2016); id 0 = none (special / padding /
# unknown). Dependency relations are reduced to their universal part ("nmod:poss" -> "nmod").
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
