"""`SyntaxMTTrainer` (token batches, predictions in dataset order, each loss term logged) and :func:`build_trainer`,
which builds it with the callbacks a run's arguments ask for: what `scripts/train.py` and `hf-syntax-mt demo` train
with."""

from __future__ import annotations

import importlib
from functools import partial

import torch
from torch.utils.data import DataLoader, SequentialSampler
from transformers import Seq2SeqTrainer
from transformers.trainer_callback import ProgressCallback

from ..errors import UserError
from ..methods.registry import callbacks as method_callbacks
from .callbacks import CheckpointAverageCallback, CurveCallback, LabelledProgressCallback, TimeBudgetCallback


def _is_term(name: str, value) -> bool:
    """A logged term of the objective: a scalar output named `*_loss` or `*_bonus` besides `loss` (the translation
    loss, each method's auxiliary loss, the symmetric model's direction losses and trace bonus)."""
    return (
        name != "loss" and name.endswith(("_loss", "_bonus")) and isinstance(value, torch.Tensor) and value.dim() == 0
    )


class SyntaxMTTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` for SyntaxMT and plain Marian models that

    - predicts and evaluates in dataset order, whatever the training sampler (transformers 5.x also groups eval and
      predict batches by length under ``train_sampling_strategy="group_by_length"``, which returns predictions in
      another order than the references);
    - forms token-based training batches (`TokenBatchSampler`) when ``max_tokens`` is given here or on the training
      arguments (``SyntaxMTTrainingArguments.max_tokens``); ``per_device_train_batch_size`` is then unused;
    - labels each prediction pass's progress bar (`LabelledProgressCallback` in the place of the Trainer's
      `ProgressCallback`: ``decoding test: last(300) (2 of 2)``, not a bare ``0/25``);
    - logs each term of the objective beside `loss`: `translation_loss`, `dbsa_loss`, `lisa_loss`, `sync_loss`,
      `fertility_loss`, `alignment_loss`, any registered method's loss, and the symmetric model's `forward_loss`,
      `backward_loss`, `symmetry_bonus` (unweighted; averaged over the optimizer steps since the last log, like
      `loss`, so exact under gradient accumulation; the one place that logs them).

    It adds the callbacks the model's methods declare (`Method.callbacks`: global fertility's
    `AlignmentTrainingCallback`, which drives its start-step schedule), each once.
    """

    def __init__(self, *args, max_tokens: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_tokens = max_tokens if max_tokens is not None else getattr(self.args, "max_tokens", None)
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens <= 0):
            raise UserError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        self._terms: dict[str, float] = {}
        self._term_calls = 0
        handler = self.callback_handler  # the same place in the list: the bars stay the last callback, as before
        handler.callbacks = [
            LabelledProgressCallback() if type(c) is ProgressCallback else c for c in handler.callbacks
        ]
        # the callbacks the model's methods declare (none for a config without methods: Marian's, a symmetric pair's)
        for path in method_callbacks(getattr(self.model, "config", None)):
            module, _, name = path.partition(":")
            callback = getattr(importlib.import_module(module), name)
            if not any(isinstance(c, callback) for c in handler.callbacks):
                self.add_callback(callback())
        from .opus_mt import PadRowCallback, keeps_pad_row_zero

        if keeps_pad_row_zero(self.model) and not any(isinstance(c, PadRowCallback) for c in handler.callbacks):
            self.add_callback(PadRowCallback())  # the opus-mt layout: the <pad> row stays zero

    def _issue_warnings_after_load(self, load_result) -> None:
        """The Trainer's warning about a resumed checkpoint's missing keys, without the keys that are missing by
        design: the tied weights (the output projection and the embeddings, saved once under their source, which
        was loaded: `all_tied_weights_keys`) and Marian's fixed sinusoidal positions (`_keys_to_ignore_on_save`).
        transformers only skips the warning where the missing keys are exactly the second set, so every resume warned
        although it was exact. Any other missing key is still reported."""
        model = self.accelerator.unwrap_model(self.model)
        tied = getattr(model, "all_tied_weights_keys", None) or {}
        ignored = set(getattr(model, "_keys_to_ignore_on_save", None) or ())
        missing = set(load_result.missing_keys)
        by_design = {k for k in missing if k in ignored or (k in tied and tied[k] not in missing)}
        if by_design & tied.keys():
            model.tie_weights()  # as transformers does where it recognises the missing keys
        rest = [k for k in load_result.missing_keys if k not in by_design]
        super()._issue_warnings_after_load(load_result._replace(missing_keys=rest))

    def _save(self, output_dir: str | None = None, state_dict=None) -> None:
        """`Trainer._save` (the model, its config, the tokenizer) plus, for a tokenizer of the opus-mt layout, its
        SentencePiece files (`opus_mt.save_opus_mt_files`): every checkpoint and the final model keep them."""
        super()._save(output_dir, state_dict=state_dict)
        if self.processing_class is not None:
            from .opus_mt import save_opus_mt_files

            save_opus_mt_files(self.processing_class, output_dir if output_dir is not None else self.args.output_dir)

    def train(self, *args, **kwargs):
        """`Seq2SeqTrainer.train`, after checking the training data's columns against what the model's methods read
        (`methods.supervision.check_columns`): a parse input missing is an error before the first step, missing
        supervision a warning (an error with ``--missing_supervision error`` or
        ``HF_SYNTAX_MT_MISSING_SUPERVISION=error``)."""
        columns = getattr(self.train_dataset, "column_names", None)
        if columns is not None and hasattr(getattr(self.model, "config", None), "validate_syntax_options"):
            from ..methods.supervision import check_columns

            error = getattr(self.args, "missing_supervision", None) == "error" or None  # else the environment's
            self.model._supervision_error = error
            check_columns(self.model, columns, error=error)
        return super().train(*args, **kwargs)

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
            for name, value in outputs.items():  # every term of the objective the model returns
                if _is_term(name, value):
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


def build_trainer(model, tokenizer, training_args, train_dataset=None, eval_dataset=None, compute_metrics=None,
                  callbacks=()) -> tuple[SyntaxMTTrainer, CurveCallback, CheckpointAverageCallback | None]:  # fmt: skip
    """The Trainer of a run: `SyntaxMTTrainer` (for vanilla Marian too: predictions in dataset order, token batches
    with ``training_args.max_tokens``, each loss term logged) with `DataCollatorForSyntaxMT` and, after the given
    ``callbacks``, the callbacks the arguments ask for: the learning curve (always), a wall-clock budget
    (``time_budget_seconds``) and checkpoint averaging (``average_checkpoints`` / ``average_every``).

    Returns:
        ``(trainer, curve, averager)``; ``averager`` is None without checkpoint averaging.
    """
    from ..data.collator import DataCollatorForSyntaxMT

    curve = CurveCallback()
    extra = [curve]
    if getattr(training_args, "time_budget_seconds", None) is not None:
        extra.append(TimeBudgetCallback(training_args.time_budget_seconds))
    averager = None
    if getattr(training_args, "average_checkpoints", 0):
        averager = CheckpointAverageCallback(training_args.average_checkpoints, training_args.average_every)
        extra.append(averager)
    trainer = SyntaxMTTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=DataCollatorForSyntaxMT(tokenizer, model=model),
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
        callbacks=[*callbacks, *extra],
    )
    return trainer, curve, averager
