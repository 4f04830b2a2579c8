"""hf-syntax-mt: syntax-aware and document-aware NMT for the Hugging Face ecosystem."""

# isort: off
# first of all: one ImportError naming the release to install where transformers or torch is older than the floor
# (or transformers at its upper bound), before transformers is imported or fails deeper (5.0-5.3: SyntaxMTConfig
# cannot be a dataclass)
from .compat import check_versions  # noqa: F401
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

# isort: on
from .configuration_syntax_mt import SyntaxMTConfig
from .modeling_syntax_mt import (
    SyntaxMTForConditionalGeneration,
    SyntaxMTModel,
    SyntaxMTPreTrainedModel,
)
from .symmetric import SymmetricTranslationConfig, SymmetricTranslationModel

__version__ = "0.1.0"

AutoConfig.register(SyntaxMTConfig.model_type, SyntaxMTConfig, exist_ok=True)
AutoModel.register(SyntaxMTConfig, SyntaxMTModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(SyntaxMTConfig, SyntaxMTForConditionalGeneration, exist_ok=True)
AutoConfig.register(SymmetricTranslationConfig.model_type, SymmetricTranslationConfig, exist_ok=True)
AutoModel.register(SymmetricTranslationConfig, SymmetricTranslationModel, exist_ok=True)

__all__ = [
    "SymmetricTranslationConfig",
    "SymmetricTranslationModel",
    "SyntaxMTConfig",
    "SyntaxMTForConditionalGeneration",
    "SyntaxMTModel",
    "SyntaxMTPreTrainedModel",
    "__version__",
]


def _register_pipeline() -> None:
    from transformers.pipelines import PIPELINE_REGISTRY

    from .pipeline_syntax_mt import SyntaxTranslationPipeline

    if "syntax-translation" not in PIPELINE_REGISTRY.supported_tasks:
        PIPELINE_REGISTRY.register_pipeline(
            "syntax-translation",
            pipeline_class=SyntaxTranslationPipeline,
            pt_model=AutoModelForSeq2SeqLM,
            type="text",
        )


_register_pipeline()
