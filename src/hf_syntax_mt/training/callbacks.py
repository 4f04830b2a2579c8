"""Trainer callbacks of training runs: a wall-clock budget (:class:`TimeBudgetCallback`), checkpoint averaging in
memory (:class:`CheckpointAverageCallback`) and the learning curve (:class:`CurveCallback`)."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

logger = logging.getLogger(__name__)


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
            save_file(
                self.sum, str(directory / "averaged_sum.safetensors"), metadata={"steps": json.dumps(self.steps)}
            )
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
        if model is not None and len(self.steps) < self.last and state.is_world_process_zero:
            wanted = [s for s in range(state.max_steps - (self.last - 1) * self.every, state.max_steps + 1,
                                       self.every)]  # fmt: skip
            why = (f"training stopped at step {state.global_step} of max_steps={state.max_steps}"
                   if state.global_step < state.max_steps else
                   f"max_steps={state.max_steps} has only {sum(s >= 1 for s in wanted)} step(s) on the grid")  # fmt: skip
            kept = (f"the average of steps {self.steps}" if self.steps else "the last step's own weights (nothing is "
                    "averaged)")  # fmt: skip
            logger.warning(f"--average_checkpoints {self.last}: {len(self.steps)} checkpoint(s) averaged, not "
                           f"{self.last} (steps {[s for s in wanted if s >= 1]} wanted, --average_every {self.every}): "
                           f"{why}. The saved model is {kept}; lower --average_checkpoints or --average_every, or "
                           "raise --max_steps / the time budget.")  # fmt: skip
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
