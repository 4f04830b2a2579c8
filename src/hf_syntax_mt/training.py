"""Small building blocks for training runs: a subword tokenizer trained on the fly, a model factory and a
wall-clock budget for the Trainer. Used by `hf-syntax-mt demo`, the benchmarks and the tests."""

from __future__ import annotations

import time
from collections.abc import Iterable

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast, Seq2SeqTrainer, TrainerCallback

from .configuration_syntax_mt import SyntaxMTConfig
from .modeling_syntax_mt import AUXILIARY_LOSSES, SyntaxMTForConditionalGeneration

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1000, min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Train a joint source/target BPE tokenizer (sentencepiece-style `▁` word boundaries) that appends `</s>`.

    Ids: `<pad>` = 0 (also Marian's decoder start), `</s>` = 1, `<unk>` = 2. The result is a fast tokenizer, so
    `word_ids()` and offsets are available for the subword mapping.
    """
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[PAD, EOS, UNK], show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    eos_id = tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS}", pair=f"$A $B {EOS}", special_tokens=[(EOS, eos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK, model_max_length=512
    )


def model_config(
    tokenizer,
    d_model: int = 128,
    layers: int = 3,
    heads: int = 4,
    ffn_dim: int = 256,
    max_position_embeddings: int = 256,
    dropout: float = 0.1,
    marian: bool = False,
    **syntax_options,
) -> SyntaxMTConfig | MarianConfig:
    """A small Marian-shaped config matching `tokenizer` (shared vocabulary, tied embeddings)."""
    dims = dict(
        vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn_dim,
        decoder_ffn_dim=ffn_dim, max_position_embeddings=max_position_embeddings, dropout=dropout,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, forced_eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None, scale_embedding=True, activation_function="relu",
    )  # fmt: skip
    if marian:
        if syntax_options:
            raise ValueError(f"A vanilla Marian config takes no syntax option, got {sorted(syntax_options)}.")
        return MarianConfig(**dims)
    return SyntaxMTConfig(**dims, **syntax_options)


def build_model(config: SyntaxMTConfig | MarianConfig, seed: int = 0):
    """`SyntaxMTForConditionalGeneration` (or `MarianMTModel` for a `MarianConfig`) with seeded random weights."""
    import torch

    torch.manual_seed(seed)
    cls = SyntaxMTForConditionalGeneration if isinstance(config, SyntaxMTConfig) else MarianMTModel
    return cls(config)


class TimeBudgetCallback(TrainerCallback):
    """Stop training once `seconds` of wall-clock time have passed (checked after every step). Under
    `torch.distributed` the processes agree (any process over budget stops all of them at the same step)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.start = None
        self.stopped_at_step = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self.start is None:
            return control
        stop = time.perf_counter() - self.start > self.seconds
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            # every process must stop at the same step, or the others wait forever in the next all-reduce
            flag = torch.tensor([int(stop)], device=args.device if dist.get_backend() == "nccl" else "cpu")
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            stop = bool(flag.item())
        if stop:
            control.should_training_stop = True
            self.stopped_at_step = state.global_step
        return control


class SyntaxMTTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` that logs each term of the objective beside `loss`: `translation_loss`, `dbsa_loss`,
    `lisa_loss`, `sync_loss` and `fertility_loss` (unweighted; averaged over the optimizer steps since the last log,
    like `loss`). With global fertility it adds `AlignmentTrainingCallback`, which drives its start-step schedule."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._terms: dict[str, float] = {}
        self._term_calls = 0
        if getattr(self.model, "global_fertility", None) is not None:
            from .alignment import AlignmentTrainingCallback

            if not any(isinstance(c, AlignmentTrainingCallback) for c in self.callback_handler.callbacks):
                self.add_callback(AlignmentTrainingCallback())  # the global-fertility schedule needs the step

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        if model.training and isinstance(outputs, dict):
            for name in ("translation_loss", *AUXILIARY_LOSSES):
                value = outputs.get(name)
                if value is not None:
                    self._terms[name] = self._terms.get(name, 0.0) + float(value.detach())
            self._term_calls += 1
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        if "loss" in logs and self._term_calls:
            # each micro-batch term is already divided by the tokens of the whole accumulated batch
            steps = self._term_calls / self.args.gradient_accumulation_steps
            logs.update({name: round(total / steps, 4) for name, total in self._terms.items()})
            self._terms, self._term_calls = {}, 0
        super().log(logs, *args, **kwargs)


__all__ = ["SyntaxMTTrainer", "TimeBudgetCallback", "build_model", "model_config", "train_tokenizer"]
