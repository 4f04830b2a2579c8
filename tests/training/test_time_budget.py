"""TimeBudgetCallback: one process over budget stops every process at the same step (2 gloo processes)."""

import os
import socket
from types import SimpleNamespace

import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, port, results):
    import torch.distributed as dist
    from transformers import TrainerControl

    from hf_syntax_mt.training import TimeBudgetCallback

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    # rank 0 has no budget left, rank 1 has plenty: both must stop
    callback = TimeBudgetCallback(0.0 if rank == 0 else 1e9)
    args, state = (
        SimpleNamespace(device="cpu"),
        SimpleNamespace(global_step=7, max_steps=10, is_world_process_zero=True),
    )
    callback.on_train_begin(args, state, TrainerControl())
    control = callback.on_step_end(args, state, TrainerControl())
    results[rank] = (control.should_training_stop, callback.stopped_at_step)
    dist.destroy_process_group()


def test_any_process_over_budget_stops_all_of_them():
    manager = mp.get_context("spawn").Manager()
    results = manager.dict()
    mp.spawn(_worker, args=(_free_port(), results), nprocs=2, join=True)
    assert dict(results) == {0: (True, 7), 1: (True, 7)}


def test_single_process_budget():
    from transformers import TrainerControl

    from hf_syntax_mt.training import TimeBudgetCallback

    args, state = (
        SimpleNamespace(device="cpu"),
        SimpleNamespace(global_step=3, max_steps=10, is_world_process_zero=True),
    )
    for seconds, expected in ((0.0, True), (1e9, False)):
        callback = TimeBudgetCallback(seconds)
        callback.on_train_begin(args, state, TrainerControl())
        assert callback.on_step_end(args, state, TrainerControl()).should_training_stop is expected
