"""Small building blocks for training runs: a subword tokenizer trained on the fly, a model factory, the Trainer
(token batches, predictions in dataset order, each loss term logged) and its callbacks (wall-clock budget,
checkpoint averaging, the validation curve). Used by `scripts/train.py`, `hf-syntax-mt demo`, the benchmarks and the
tests."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from torch.utils.data import DataLoader, SequentialSampler
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
    """`Seq2SeqTrainer` for SyntaxMT and plain Marian models that

    - predicts and evaluates in dataset order, whatever the training sampler (transformers 5.x also groups eval and
      predict batches by length under ``train_sampling_strategy="group_by_length"``, which returns predictions in
      another order than the references);
    - forms token-based training batches (`TokenBatchSampler`) when ``max_tokens`` is given here or on the training
      arguments (``SyntaxMTTrainingArguments.max_tokens``); ``per_device_train_batch_size`` is then unused;
    - logs each term of the objective beside `loss`: `translation_loss`, `dbsa_loss`, `lisa_loss`, `sync_loss` and
      `fertility_loss` (unweighted; averaged over the optimizer steps since the last log, like `loss`). With global
      fertility it adds `AlignmentTrainingCallback`, which drives its start-step schedule.
    """

    def __init__(self, *args, max_tokens: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_tokens = max_tokens if max_tokens is not None else getattr(self.args, "max_tokens", None)
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens <= 0):
            raise ValueError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        self._terms: dict[str, float] = {}
        self._term_calls = 0
        if getattr(self.model, "global_fertility", None) is not None:
            from .alignment import AlignmentTrainingCallback

            if not any(isinstance(c, AlignmentTrainingCallback) for c in self.callback_handler.callbacks):
                self.add_callback(AlignmentTrainingCallback())  # the global-fertility schedule needs the step

    def _get_eval_sampler(self, eval_dataset):
        if eval_dataset is None or not hasattr(eval_dataset, "__len__"):
            return None
        # one process: in order; several: None, and accelerate shards in order and gathers back in order
        return SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None

    def get_train_dataloader(self) -> DataLoader:
        if not self.max_tokens:
            return super().get_train_dataloader()
        import datasets
        from transformers.trainer_utils import seed_worker

        from .batching import TokenBatchSampler, token_lengths

        dataset, collator = self.train_dataset, self.data_collator
        if isinstance(dataset, datasets.Dataset):
            dataset = self._remove_unused_columns(dataset, description="Training")
        else:
            collator = self._get_collator_with_removed_columns(collator, description="Training")
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        sampler = TokenBatchSampler(token_lengths(dataset), self.max_tokens, seed=seed,
                                    num_replicas=max(1, self.args.world_size), rank=self.args.process_index)  # fmt: skip
        loader = DataLoader(
            dataset, batch_sampler=sampler, collate_fn=collator, num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory, persistent_workers=self.args.dataloader_persistent_workers,
            worker_init_fn=partial(seed_worker, num_workers=self.args.dataloader_num_workers,
                                   rank=self.args.process_index),
        )  # fmt: skip
        loader = self.accelerator.prepare(loader)
        # the sampler already gives each process its own batches: make accelerate's shard wrapper a passthrough
        wrapper = getattr(loader, "batch_sampler", None)
        if wrapper is not None and getattr(wrapper, "batch_sampler", None) is sampler:
            wrapper.num_processes, wrapper.process_index = 1, 0
        return loader

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


class CheckpointAverageCallback(TrainerCallback):
    """Average the weights of the last ``last`` checkpoints, ``every`` steps apart (the final step included), and
    load the average into the model when training ends, as `fairseq-scripts/average_checkpoints.py` does from disk
    (here in memory: nothing is saved). ``last_state`` keeps the final step's own weights (on the CPU) so that both can
    be scored. With a time budget the run may stop early: then the steps before it that fall on the grid are
    averaged, or nothing when none does."""

    def __init__(self, last: int = 5, every: int = 100):
        if last < 1 or every < 1:
            raise ValueError(f"checkpoint averaging needs last >= 1 and every >= 1, got last={last}, every={every}")
        self.last, self.every = last, every
        self.sum: dict[str, torch.Tensor] | None = None
        self.steps: list[int] = []
        self.last_state: dict[str, torch.Tensor] | None = None

    def on_step_end(self, args, state, control, model=None, **kwargs):
        due = state.max_steps - state.global_step
        if model is None or due < 0 or due % self.every or due >= self.last * self.every:
            return control
        with torch.no_grad():
            params = {k: v.detach().float().cpu() for k, v in model.state_dict().items() if v.is_floating_point()}
            if self.sum is None:
                self.sum = {k: v.clone() for k, v in params.items()}
            else:
                for k, v in params.items():
                    self.sum[k] += v
        self.steps.append(state.global_step)
        return control

    def on_save(self, args, state, control, **kwargs):
        if self.sum is not None and state.is_world_process_zero:
            from safetensors.torch import save_file

            directory = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            directory.mkdir(parents=True, exist_ok=True)
            save_file(self.sum, str(directory / "averaged_sum.safetensors"), metadata={"steps": json.dumps(self.steps)})
        return control

    def load_from(self, checkpoint: str | os.PathLike) -> None:
        """Resume: the running sum saved with a checkpoint inside the averaging window (`on_save`)."""
        path = Path(checkpoint) / "averaged_sum.safetensors"
        if path.is_file():
            from safetensors import safe_open

            with safe_open(str(path), "pt") as f:
                self.steps = json.loads(f.metadata()["steps"])
                self.sum = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if model is None or not self.steps:
            return control
        with torch.no_grad():
            current = model.state_dict()
            self.last_state = {k: v.detach().cpu().clone() for k, v in current.items()}
            for k, total in self.sum.items():
                current[k].copy_((total / len(self.steps)).to(current[k].dtype))
        return control


class CurveCallback(TrainerCallback):
    """Records ``(step, training minutes, tokens seen, eval metrics)`` after each evaluation: the learning curve.
    Training minutes leave out the time spent evaluating. Saved with each checkpoint (``curve.json``) and restored
    by `load_from` when a run resumes, so the minutes add up across interrupted runs."""

    def __init__(self):
        self.points: list[dict] = []
        self.start = self.last_step_end = None
        self.eval_seconds = 0.0
        self.offset_seconds = 0.0  # training seconds of the runs before a resume

    def train_seconds(self, now: float | None = None) -> float:
        if self.start is None:
            return self.offset_seconds
        now = time.perf_counter() if now is None else now
        return self.offset_seconds + now - self.start - self.eval_seconds

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            directory = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            directory.mkdir(parents=True, exist_ok=True)
            state_ = {"points": self.points, "train_seconds": self.train_seconds(self.last_step_end)}
            (directory / "curve.json").write_text(json.dumps(state_), encoding="utf-8")
        return control

    def load_from(self, checkpoint: str | os.PathLike) -> None:
        path = Path(checkpoint) / "curve.json"
        if path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            self.points, self.offset_seconds = saved["points"], saved["train_seconds"]

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = self.last_step_end = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.last_step_end = time.perf_counter()

    def on_train_end(self, args, state, control, **kwargs):
        if self.start is not None:  # freeze the clock: prediction after training is not training time
            self.offset_seconds, self.start = self.train_seconds(self.last_step_end), None

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.start is None:
            return control
        now = time.perf_counter()
        self.eval_seconds += now - self.last_step_end  # evaluation runs right after a step ends
        point = {"step": state.global_step, "train_minutes": round(self.train_seconds(now) / 60, 3),
                 "tokens_seen": state.num_input_tokens_seen}  # fmt: skip
        point.update({k: v for k, v in (metrics or {}).items() if isinstance(v, (int, float))})
        self.points.append(point)
        self.last_step_end = now  # the next eval's time starts after this one
        return control


__all__ = [
    "CheckpointAverageCallback",
    "CurveCallback",
    "SyntaxMTTrainer",
    "TimeBudgetCallback",
    "build_model",
    "model_config",
    "train_tokenizer",
]
