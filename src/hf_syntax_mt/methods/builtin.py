"""Registers the built-in methods, in head order: in a layer, PASCAL heads come first, then syntax-directed (tree)
heads, then LISA and DBSA heads; the remaining heads are plain. (Import order is registration order.)"""

from .pascal import Pascal  # PASCAL, Bugliarello & Okazaki 2020
from .tree_distance import TreeDistance  # syntax-directed heads, Chen et al. 2017
from .biaffine import Biaffine  # LISA, DBSA  # isort: skip
from .synchronous import Synchronous  # synchronous syntactic attention loss  # isort: skip
from .input_features import InputFeatures  # Sennrich & Haddow 2016  # isort: skip
from .alignment_bias import AlignmentBias  # Cohn et al. 2016 structural biases
from .fertility import Fertility  # Cohn et al. 2016 global fertility  # isort: skip
from .document_context import DocumentContext  # Zhang et al. 2018  # isort: skip

BUILTIN = (Pascal, TreeDistance, Biaffine, Synchronous, InputFeatures, AlignmentBias, Fertility, DocumentContext)
