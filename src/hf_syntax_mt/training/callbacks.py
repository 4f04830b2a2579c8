"""Trainer callbacks of training runs: a wall-clock budget (:class:`TimeBudgetCallback`), checkpoint averaging in
memory (:class:`CheckpointAverageCallback`), the learning curve (:class:`CurveCallback`) and progress bars that say
what each prediction pass decodes (:class:`LabelledProgressCallback`)."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback
from transformers.trainer_utils import has_length

from ..errors import UserError

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
        if stop and self.stopped_at_step is None:
            control.should_training_stop = True
            self.stopped_at_step = state.global_step
            if state.is_world_process_zero:
                logger.warning("--time_budget_seconds %g: training stopped at step %d of %d, after %.0f s of the "
                               "wall-clock budget (the run file records it as time_budget)", self.seconds,
                               state.global_step, state.max_steps, time.perf_counter() - self.start)  # fmt: skip
        elif stop:
            control.should_training_stop = True
        return control

    def record(self, max_steps: int) -> dict:
        """What the run file records: the budget, and the step it stopped training at (None: it did not)."""
        return {"seconds": self.seconds, "stopped": self.stopped_at_step is not None,
                "stopped_at_step": self.stopped_at_step, "max_steps": max_steps}  # fmt: skip


class CheckpointAverageCallback(TrainerCallback):
    """Average the weights of the last ``last`` checkpoints, ``every`` steps apart (the final step included), and
    load the average into the model when training ends, as `fairseq-scripts/average_checkpoints.py` does from disk
    (here in memory: nothing is saved). ``last_state`` keeps the final step's own weights (on the CPU) so that both can
    be scored. With a time budget the run may stop early: then the steps before it that fall on the grid are
    averaged, or nothing when none does.

    The running sum is saved with each checkpoint inside the window (``averaged_sum.safetensors``, with its steps and
    the flags it was made under) and restored by `load_from`. When training (re)starts, the sum must hold exactly the
    steps of this run's window up to the resumed step: a resume with other ``last``, ``every`` or ``max_steps`` has
    another window, so the sum is rebuilt from the ``checkpoint-*`` weights of those steps in ``output_dir``, or,
    when one of them is gone, the run is refused with the flags that made the saved sum."""

    FILE = "averaged_sum.safetensors"

    def __init__(self, last: int = 5, every: int = 100):
        if last < 1 or every < 1:
            raise UserError(f"checkpoint averaging needs last >= 1 and every >= 1, got last={last}, every={every}")
        self.last, self.every = last, every
        self.sum: dict[str, torch.Tensor] | None = None
        self.steps: list[int] = []
        self.saved_flags: dict | None = None  # the flags of a sum restored by load_from
        self.loaded_from: Path | None = None  # the file of a sum restored by load_from
        self.last_state: dict[str, torch.Tensor] | None = None
        self.average_state: dict[str, torch.Tensor] | None = None  # kept by `averaging.choose_weights`

    def window(self, max_steps: int) -> list[int]:
        """The steps averaged by a run of ``max_steps``: the last ``last`` multiples of ``every`` back from it."""
        return [s for s in range(max_steps - (self.last - 1) * self.every, max_steps + 1, self.every) if s >= 1]

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
            flags = {"last": self.last, "every": self.every, "max_steps": state.max_steps}
            save_file(self.sum, str(directory / self.FILE),
                      metadata={"steps": json.dumps(self.steps), "flags": json.dumps(flags)})  # fmt: skip
        return control

    def load_from(self, checkpoint: str | os.PathLike) -> None:
        """Resume: the running sum saved with a checkpoint inside the averaging window (`on_save`). A file that
        cannot be read is a `ValueError` naming it and saying what to do."""
        path = Path(checkpoint) / self.FILE
        if not path.is_file():
            return
        from safetensors import safe_open

        try:
            with safe_open(str(path), "pt") as f:
                metadata = f.metadata() or {}
                steps = json.loads(metadata["steps"])
                flags = json.loads(metadata["flags"]) if "flags" in metadata else None
                tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
        except Exception as error:  # SafetensorError, a missing or broken "steps" entry: the file is damaged
            raise UserError(
                f"{path}: the running sum of checkpoint averaging cannot be read ({type(error).__name__}: {error}); "
                "the file is truncated or corrupt. Delete it and resume again: the sum is then rebuilt from the "
                f"checkpoint-* weights in {Path(checkpoint).parent} (or the resume is refused, naming the missing "
                "checkpoint)."
            ) from error
        if not isinstance(steps, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
            raise UserError(f"{path}: its metadata 'steps' must be a list of step numbers, got {steps!r:.60}; the file "
                             "is corrupt: delete it and resume again (the sum is rebuilt from the checkpoints)")  # fmt: skip
        self.steps, self.sum, self.saved_flags = list(steps), tensors, flags
        self.loaded_from = path

    def check_sum(self, model) -> None:
        """The restored running sum must hold the model's floating-point weights, by name and shape: a readable sum of
        another model (another size, or another library's) would end in a bare ``KeyError`` or a shape error at the
        first averaged step. `UserError` naming the file and the first names that differ."""
        if self.sum is None or model is None:
            return
        shapes = {k: tuple(v.shape) for k, v in model.state_dict().items() if v.is_floating_point()}
        saved = {k: tuple(v.shape) for k, v in self.sum.items()}
        fix = (f"the file belongs to another model (another size or configuration); delete {self.loaded_from} and "
               "resume again (the sum is rebuilt from the checkpoints), or resume the run that wrote it")  # fmt: skip
        missing, extra = sorted(shapes.keys() - saved.keys()), sorted(saved.keys() - shapes.keys())
        if missing or extra:
            raise UserError(f"{self.loaded_from}: the running sum of checkpoint averaging does not hold this model's "
                            f"weights (missing {missing[:3]}{' ...' if len(missing) > 3 else ''}, not in the model "
                            f"{extra[:3]}{' ...' if len(extra) > 3 else ''}): {fix}")  # fmt: skip
        if wrong := [k for k in shapes if shapes[k] != saved[k]]:
            k = wrong[0]
            raise UserError(f"{self.loaded_from}: the running sum of checkpoint averaging holds {k} of shape "
                            f"{list(saved[k])}, the model's is {list(shapes[k])} ({len(wrong)} weight(s) differ): "
                            f"{fix}")  # fmt: skip

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        # the sum must hold this run's window up to the resumed step; another window (other flags) is rebuilt
        wanted = [s for s in self.window(state.max_steps) if s <= state.global_step]
        if model is None:
            return control
        if sorted(self.steps) == wanted:  # the restored sum goes on: it must be this model's
            self.check_sum(model)
            return control
        directory = Path(args.output_dir)
        if not wanted:  # this run's window starts after the resumed step: nothing of the saved sum belongs to it
            logger.warning(f"checkpoint averaging: the saved running sum (steps {sorted(self.steps)}) lies outside "
                           f"this run's window {self.window(state.max_steps)}: dropped")  # fmt: skip
            self.sum, self.steps = None, []
            return control
        missing = [s for s in wanted if _weights_file(directory / f"checkpoint-{s}") is None]
        if missing:
            made = (f"--average_checkpoints {self.saved_flags['last']} --average_every {self.saved_flags['every']} "
                    f"--max_steps {self.saved_flags['max_steps']}" if self.saved_flags else "other averaging flags")  # fmt: skip
            raise UserError(
                f"checkpoint averaging: --average_checkpoints {self.last} --average_every {self.every} with max_steps "
                f"{state.max_steps} averages steps {self.window(state.max_steps)}, of which {wanted} come before the "
                f"resumed step {state.global_step}; the saved running sum holds steps {sorted(self.steps)} (made with "
                f"{made}) and the weights of {', '.join(f'checkpoint-{s}' for s in missing)} are not in {directory} "
                "to rebuild it. Resume with the flags the run started with, or start a new run."
            )
        self.sum = self._rebuild(model, [directory / f"checkpoint-{s}" for s in wanted])
        logger.warning(f"checkpoint averaging: the saved running sum held steps {sorted(self.steps)}, this run's "
                       f"window (--average_checkpoints {self.last} --average_every {self.every}, max_steps "
                       f"{state.max_steps}) needs {wanted} before the resumed step {state.global_step}: rebuilt from "
                       "those checkpoints' weights")  # fmt: skip
        self.steps = list(wanted)
        return control

    @staticmethod
    def _rebuild(model, checkpoints: list[Path]) -> dict[str, torch.Tensor] | None:
        """The sum of the checkpoints' weights under the model's state-dict names (float32, on the CPU). A tied
        weight saved once (the output projection and the embeddings) is read under its saved name; a tensor no
        checkpoint stores (Marian's fixed sinusoidal positions) keeps the model's value, as the Trainer's resume
        leaves it."""
        current = {k: v for k, v in model.state_dict().items() if v.is_floating_point()}
        by_storage: dict[int, list[str]] = {}  # tied weights share their storage: every name of each
        for k, v in current.items():
            by_storage.setdefault(v.data_ptr(), []).append(k)
        aliases = {k: [k] + [n for n in by_storage[v.data_ptr()] if n != k] for k, v in current.items()}
        total: dict[str, torch.Tensor] | None = None
        for checkpoint in checkpoints:
            saved = _load_weights(_weights_file(checkpoint))
            params = {}
            for k, v in current.items():
                name = next((n for n in aliases[k] if n in saved), None)
                params[k] = (saved[name] if name is not None else v).detach().float().cpu().clone()  # no sharing
            total = params if total is None else {k: total[k] + v for k, v in params.items()}
        return total

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if model is not None and len(self.steps) < self.last and state.is_world_process_zero:
            wanted = self.window(state.max_steps)
            why = (f"training stopped at step {state.global_step} of max_steps={state.max_steps}"
                   if state.global_step < state.max_steps else
                   f"max_steps={state.max_steps} has only {len(wanted)} step(s) on the grid")  # fmt: skip
            kept = (f"the average of steps {self.steps}" if self.steps else "the last step's own weights (nothing is "
                    "averaged)")  # fmt: skip
            logger.warning(f"--average_checkpoints {self.last}: {len(self.steps)} checkpoint(s) averaged, not "
                           f"{self.last} (steps {wanted} wanted, --average_every {self.every}): "
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


def _weights_file(checkpoint: Path) -> Path | None:
    """The model weights a Trainer checkpoint holds (one file, or a sharded index), or None."""
    for name in ("model.safetensors", "model.safetensors.index.json"):
        if (checkpoint / name).is_file():
            return checkpoint / name
    return None


def _load_weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    try:
        if path.name.endswith(".index.json"):
            shards = sorted(set(json.loads(path.read_text(encoding="utf-8"))["weight_map"].values()))
            return {k: v for shard in shards for k, v in load_file(str(path.parent / shard)).items()}
        return load_file(str(path))
    except Exception as error:  # SafetensorError, a broken index: the checkpoint's weights cannot be read
        raise UserError(
            f"{path}: the checkpoint's weights cannot be read ({type(error).__name__}: {error}); the file "
            "is truncated or corrupt: delete that checkpoint directory, or resume from another"
        ) from error


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
            try:
                saved = json.loads(path.read_text(encoding="utf-8"))
                points, seconds = saved["points"], saved["train_seconds"]
                if not isinstance(points, list) or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                    raise TypeError(f"points {type(points).__name__}, train_seconds {type(seconds).__name__}")
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
                raise UserError(f"{path}: the learning curve of the resumed run cannot be read ({type(error).__name__}: "
                                f"{error}); the file is truncated or edited: delete it to resume with the curve "
                                "restarted, or resume from another checkpoint") from None  # fmt: skip
            self.points, self.offset_seconds = points, float(seconds)

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


class LabelledProgressCallback(ProgressCallback):
    """transformers' `ProgressCallback` (the training bar, and a bar for each prediction pass) whose prediction bars
    say what they decode: ``decode_label`` while it is set (`scoring.Decodes` sets it: ``decoding validation:
    average(200+250+300) (1 of 4)``), else ``evaluating at step N``. The Trainer's own bar has no description (a bare
    ``0/25``); this one is made with it, before `ProgressCallback.on_prediction_step`, which then only advances it.
    `SyntaxMTTrainer` puts it in the place of the Trainer's `ProgressCallback`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.decode_label: str | None = None

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if state.is_world_process_zero and has_length(eval_dataloader) and self.prediction_bar is None:
            label = self.decode_label or f"evaluating at step {state.global_step}"
            self.prediction_bar = tqdm(total=len(eval_dataloader), desc=label, leave=self.training_bar is None,
                                       dynamic_ncols=True)  # fmt: skip
        return super().on_prediction_step(args, state, control, eval_dataloader=eval_dataloader, **kwargs)
