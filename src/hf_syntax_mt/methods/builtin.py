"""The built-in methods, registered here in head order: in a layer, the heads of a method listed earlier come first
(PASCAL's first); the remaining heads are plain. Every reader of head positions asks the registry
(`registry.head_layout` / `head_kinds`), so a method may be added anywhere in this list. Adding a built-in method is
its module, its test, its docs page and one line here (CONTRIBUTING.md, "Adding a method")."""

from .alignment_bias import AlignmentBias
from .biaffine import Biaffine
from .decoder_deprel import DecoderDeprel
from .document_context import DocumentContext
from .fertility import Fertility
from .guided_alignment import GuidedAlignment
from .input_features import InputFeatures
from .pascal import Pascal
from .registry import register, registered
from .synchronous import Synchronous
from .tree_bias import TreeBias
from .tree_distance import TreeDistance

BUILTIN = (
    Pascal,  # PASCAL, Bugliarello & Okazaki 2020
    TreeDistance,  # syntax-directed heads, Chen et al. 2017
    TreeBias,  # learned tree-distance bias heads (the distance of Chen et al. 2017)
    Biaffine,  # LISA (Strubell et al. 2018) and DBSA (Deguchi et al. 2019)
    Synchronous,  # the synchronous syntactic attention loss
    InputFeatures,  # Sennrich & Haddow 2016
    AlignmentBias,  # Cohn et al. 2016, structural biases
    Fertility,  # Cohn et al. 2016, global fertility
    GuidedAlignment,  # Garg et al. 2019
    DocumentContext,  # Zhang et al. 2018
    DecoderDeprel,  # target dependency-relation labels, a decoder classifier
)
if not any(isinstance(m, BUILTIN) for m in registered()):
    for method in BUILTIN:
        register(method())
