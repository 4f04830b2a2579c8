"""Token-based batching, as fairseq (``--max-tokens``), Marian (``--mini-batch-words``) and Sockeye do: batches of
pairs of similar length, each holding at most ``max_tokens`` padded tokens, in a new random order every epoch.

A batch of ``n`` pairs whose longest side (source or target, in subword tokens) is ``L`` costs ``n * L`` padded
tokens (fairseq's rule). Batches are formed once per epoch: the pairs are shuffled (so that pairs of equal length
are grouped differently each epoch), stably sorted by length, cut greedily into batches of at most ``max_tokens``,
and the batches are shuffled. Under ``torch.distributed`` / ``accelerate`` each process takes every
``num_replicas``-th batch; when the number of batches is not a multiple of ``num_replicas``, the first batches of
the epoch's order are repeated so that every process runs the same number of steps (as `DistributedSampler` pads).

    sampler = TokenBatchSampler(token_lengths(train_dataset), max_tokens=4096, seed=0)
    loader = DataLoader(train_dataset, batch_sampler=sampler, collate_fn=collator)

With `SyntaxMTTrainer` set ``max_tokens`` on the training arguments (`scripts/train.py --max_tokens N`) or pass
``SyntaxMTTrainer(..., max_tokens=N)``; ``per_device_train_batch_size`` is then ignored for training.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler

from ..errors import UserError


def token_lengths(dataset, source_column: str = "input_ids", target_column: str = "labels") -> list[int]:
    """Per pair, the longer of its source and target lengths in tokens (what one row adds to a padded batch).

    ``dataset`` is a `datasets.Dataset` (or any mapping of columns to lists of token lists)."""
    sources = dataset[source_column]
    if target_column in getattr(dataset, "column_names", dataset):
        targets = dataset[target_column]
        return [max(len(s), len(t)) for s, t in zip(sources, targets, strict=True)]
    return [len(s) for s in sources]


class TokenBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices, each batch at most ``max_tokens`` padded tokens (``n * max length``).

    Args:
        lengths: per pair, its cost in tokens (see `token_lengths`).
        max_tokens: the most padded tokens in a batch. A pair longer than this raises `ValueError` (truncate the
            data, e.g. ``--max_source_length``, or raise ``max_tokens``).
        shuffle: a new grouping and order every epoch (``set_epoch``); False: batches in length order.
        seed: the base seed; epoch ``e`` uses ``seed + e``, identical on every process.
        num_replicas, rank: the process count and this process's index (default: one process).
        max_sentences: optional cap on the pairs in a batch.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        max_sentences: int | None = None,
    ):
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
            raise UserError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if max_sentences is not None and max_sentences <= 0:
            raise UserError(f"max_sentences must be positive or None, got {max_sentences!r}")
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise UserError(f"rank {rank} is not in [0, num_replicas={num_replicas})")
        self.lengths = torch.as_tensor(list(lengths), dtype=torch.long)  # (N,)
        if self.lengths.numel() == 0:
            raise UserError("TokenBatchSampler got an empty dataset")
        too_long = (self.lengths > max_tokens).nonzero().flatten()
        if too_long.numel():
            i = int(too_long[0])
            raise UserError(
                f"{too_long.numel()} pair(s) are longer than max_tokens={max_tokens} (the first: index {i}, "
                f"{int(self.lengths[i])} tokens): truncate them (max_source_length / max_target_length) or raise "
                "max_tokens"
            )
        self.max_tokens, self.max_sentences = max_tokens, max_sentences
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.num_replicas, self.rank = num_replicas, rank
        self._cache: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Called by the Trainer (and by hand with a plain DataLoader) before each epoch."""
        self.epoch = epoch

    def batches(self) -> list[list[int]]:
        """Every batch of this epoch, for all processes, in the order they are served."""
        if self._cache is not None and self._cache[0] == self.epoch:
            return self._cache[1]
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=g) if self.shuffle else torch.arange(len(self.lengths))
        # stable sort by length: ties keep the random order, so equal-length pairs meet new neighbours each epoch
        order = order[torch.sort(self.lengths[order], stable=True).indices].tolist()
        lengths = self.lengths.tolist()
        out, batch, longest = [], [], 0
        for i in order:  # greedy cut of the sorted order: O(N) once per epoch, not on the training step
            longer = max(longest, lengths[i])
            full = self.max_sentences is not None and len(batch) == self.max_sentences
            if batch and (longer * (len(batch) + 1) > self.max_tokens or full):
                out.append(batch)
                batch, longer = [], lengths[i]
            batch.append(i)
            longest = longer
        out.append(batch)
        if self.shuffle:
            out = [out[k] for k in torch.randperm(len(out), generator=g).tolist()]
        if self.num_replicas > 1 and len(out) % self.num_replicas:
            out += out[: self.num_replicas - len(out) % self.num_replicas]  # every process gets as many steps
        self._cache = (self.epoch, out)
        return out

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.batches()[self.rank :: self.num_replicas]

    def __len__(self) -> int:
        return len(self.batches()) // self.num_replicas


__all__ = ["TokenBatchSampler", "token_lengths"]
