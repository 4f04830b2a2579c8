"""Greedy and beam search over a decoder that runs one step at a time (`Rows`), giving the token ids transformers'
`generate` gives for the same logits.

The two loops follow transformers 5's `GenerationMixin._sample` (greedy) and `_beam_search` (its vectorised beam
search: top 2K continuations, finished beams kept when they beat the worst kept one, the same early-stopping
heuristic and length penalty) and use its own logits processors, built from the generation config as `generate`
builds them. One thing differs, and it does not change the result: a sentence whose search is over (greedy: it
produced `</s>`; beam: no running beam can still beat its finished ones) leaves the decoder, so later steps compute
only the sentences still running. Every operation of both searches is per sentence, so dropping one changes nothing
for the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import GenerationConfig
from transformers.generation.logits_process import (
    ForcedBOSTokenLogitsProcessor,
    ForcedEOSTokenLogitsProcessor,
    LogitsProcessorList,
    MinLengthLogitsProcessor,
    MinNewTokensLengthLogitsProcessor,
    NoBadWordsLogitsProcessor,
    SuppressTokensLogitsProcessor,
)

from ..errors import UserError
from ..generation_defaults import check_generation_options, resolve_generation


class Rows(Protocol):
    """The decoder's rows (one per sentence, or per beam) and their caches."""

    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        """Feed `tokens` `(N,)` (the last token of each row, at `position`); return the logits `(N, V)` float32."""

    def keep(self, rows: torch.Tensor, same_source: bool) -> None:
        """Keep the rows `rows` `(N',)` in this order (row i becomes old row `rows[i]`); `same_source`: every row
        keeps its sentence (a beam reorder), so the source side needs no gather."""


#: the `GenerationConfig` fields the searches read; any other field set to a value other than its default is refused
#: (`generation_defaults.check_generation_options`), unless it changes no token (`INERT_GENERATION_FIELDS`)
IMPLEMENTED = frozenset({
    "max_length", "max_new_tokens", "min_length", "min_new_tokens", "num_beams", "length_penalty", "early_stopping",
    "bad_words_ids", "forced_bos_token_id", "forced_eos_token_id", "suppress_tokens", "eos_token_id",
    "pad_token_id", "decoder_start_token_id", "bos_token_id",
})  # fmt: skip


@dataclass
class Search:
    """The settings of one `generate` call (`generation_defaults.resolve_generation`) as the searches read them."""

    start_id: int
    pad_id: int
    eos_ids: list[int]
    max_length: int  # decoder start token included
    num_beams: int
    length_penalty: float
    early_stopping: bool | str
    processors: LogitsProcessorList


def resolve_search(model, engine: str, kwargs: dict) -> tuple[Search, dict]:
    """The generation config of ``model`` updated with ``kwargs`` (as `generate` does), as a `Search`, and the
    keyword arguments that are not generation options (the model inputs).

    Raises:
        UserError: an option the searches do not implement (any field of the generation config but `IMPLEMENTED`
            and the inert ones, set to a value other than its default: sampling, several returned sequences,
            repetition penalties, ...), naming it and ``engine``.
    """
    if kwargs.get("decoder_input_ids") is not None:
        raise UserError(f"engine={engine!r} starts every output from the decoder start token: decoder_input_ids "
                        "(a forced prefix) needs engine='generate'")  # fmt: skip
    config, inputs = resolve_generation(model, kwargs)
    inputs.pop("decoder_input_ids", None)
    check_generation_options(config, IMPLEMENTED, f"engine={engine!r}", "translate with engine='generate'")
    eos = config.eos_token_id if config.eos_token_id is not None else model.config.eos_token_id
    eos_ids = [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])] if eos is not None else []
    pad = config.pad_token_id if config.pad_token_id is not None else (eos_ids[0] if eos_ids else None)
    start = config.decoder_start_token_id if config.decoder_start_token_id is not None else config.bos_token_id
    start = model.config.decoder_start_token_id if start is None else start
    if start is None or pad is None:
        raise UserError(f"engine={engine!r}: the model's generation config names no decoder_start_token_id or "
                        "pad_token_id")  # fmt: skip
    defaults = GenerationConfig._get_default_generation_params()  # transformers 5 applies these where unset
    for name in ("min_length", "length_penalty", "early_stopping"):
        if getattr(config, name, None) is None:
            setattr(config, name, defaults[name])
    max_length = config.max_length if config.max_new_tokens is None else 1 + config.max_new_tokens
    eos_tensor = torch.tensor(eos_ids) if eos_ids else None
    processors = LogitsProcessorList()  # in the order `GenerationMixin._get_logits_processor` builds them
    if config.bad_words_ids is not None:
        processors.append(NoBadWordsLogitsProcessor(config.bad_words_ids, eos_tensor))
    if config.min_length and eos_tensor is not None:
        processors.append(MinLengthLogitsProcessor(config.min_length, eos_tensor))
    if config.min_new_tokens and eos_tensor is not None:
        processors.append(MinNewTokensLengthLogitsProcessor(1, config.min_new_tokens, eos_tensor))
    if config.forced_bos_token_id is not None:
        processors.append(ForcedBOSTokenLogitsProcessor(config.forced_bos_token_id))
    if config.forced_eos_token_id is not None:
        processors.append(ForcedEOSTokenLogitsProcessor(max_length, config.forced_eos_token_id))
    if config.suppress_tokens is not None:
        processors.append(SuppressTokensLogitsProcessor(config.suppress_tokens))
    search = Search(int(start), int(pad), eos_ids, int(max_length), int(config.num_beams or 1),
                    float(config.length_penalty), config.early_stopping, processors)  # fmt: skip
    return search, inputs


def greedy_search(rows: Rows, batch_size: int, search: Search) -> torch.LongTensor:
    """Greedy decoding of `batch_size` sentences whose rows are `rows` (one per sentence): `(B, L)` token ids, the
    decoder start first and `pad` after `</s>`, as `generate(num_beams=1)` returns them."""
    sequences = torch.full((batch_size, 1), search.start_id, dtype=torch.long)
    eos = torch.tensor(search.eos_ids, dtype=torch.long)
    alive = torch.arange(batch_size)  # the sentences whose rows are in `rows`, in row order
    while True:
        cur_len = sequences.shape[1]
        logits = rows.step(sequences[alive, -1], cur_len - 1)  # (n, V)
        scores = search.processors(sequences[alive], logits)
        next_tokens = torch.full((batch_size,), search.pad_id, dtype=torch.long)
        next_tokens[alive] = scores.argmax(dim=-1)
        sequences = torch.cat([sequences, next_tokens[:, None]], dim=1)
        done = torch.isin(next_tokens[alive], eos) | (cur_len + 1 >= search.max_length)
        if bool(done.all()):
            return sequences
        if bool(done.any()):
            running = (~done).nonzero().squeeze(1)
            rows.keep(running, same_source=False)
            alive = alive[running]


def beam_search(rows: Rows, batch_size: int, search: Search) -> torch.LongTensor:
    """Beam search of `batch_size` sentences whose rows are `rows` (`num_beams` per sentence, sentence-major):
    `(B, L)` token ids of each sentence's best hypothesis, as `generate(num_beams=K)` returns them (transformers 5's
    `_beam_search`, step for step; see the module docstring)."""
    k, max_length, penalty = search.num_beams, search.max_length, search.length_penalty
    keep_k = max(2, 1 + len(search.eos_ids)) * k  # candidates kept per step, so that K of them can still run
    top_k_mask = torch.arange(keep_k) < k
    eos = torch.tensor(search.eos_ids, dtype=torch.long)
    # transformers writes `pad_token_id or eos_token_id[0]`: a pad id of 0 fills with the first eos id
    fill = search.pad_id if search.pad_id else (search.eos_ids[0] if search.eos_ids else -1)
    running = torch.full((batch_size, k, max_length), fill, dtype=torch.long)
    running[:, :, 0] = search.start_id
    finished = running.clone()
    running_scores = torch.zeros(batch_size, k)
    running_scores[:, 1:] = -1e9  # only the first beam's continuations count at the first step
    finished_scores = torch.full((batch_size, k), -1e9)
    is_finished = torch.zeros(batch_size, k, dtype=torch.bool)
    unsatisfied = torch.ones(batch_size, 1, dtype=torch.bool)  # a running beam may still beat a finished one
    running_origin = torch.full((batch_size, k, max_length - 1), -1, dtype=torch.long)  # beam index per step
    finished_origin = running_origin.clone()
    out_sequences, out_origin = finished.clone(), finished_origin.clone()
    alive = torch.arange(batch_size)
    cur_len = 1
    while True:
        n = alive.numel()
        flat = running[:, :, :cur_len].reshape(n * k, cur_len)
        logits = rows.step(flat[:, -1], cur_len - 1)  # (n K, V)
        log_probs = search.processors(flat, torch.log_softmax(logits, dim=-1))
        vocab = log_probs.shape[-1]
        log_probs = (log_probs.view(n, k, vocab) + running_scores[:, :, None]).view(n, k * vocab)
        # top 2K continuations over every beam of the sentence
        top_scores, top_index = torch.topk(log_probs, k=keep_k)
        top_beam = top_index // vocab  # (n, 2K)
        top_running = running.gather(1, top_beam[:, :, None].expand(-1, -1, max_length)).clone()
        top_running[:, :, cur_len] = top_index % vocab
        top_origin = running_origin.gather(1, top_beam[:, :, None].expand(-1, -1, max_length - 1)).clone()
        top_origin[:, :, cur_len - 1] = top_beam + torch.arange(n)[:, None] * k
        hits = torch.isin(top_running[:, :, cur_len], eos) | (cur_len + 1 >= max_length)  # (n, 2K)
        # the K best candidates that are still running continue
        still_running = top_scores + hits.float() * -1.0e9
        best = torch.topk(still_running, k=k)[1]
        running = top_running.gather(1, best[:, :, None].expand(-1, -1, max_length))
        running_scores = still_running.gather(1, best)
        running_origin = top_origin.gather(1, best[:, :, None].expand(-1, -1, max_length - 1))
        # finished candidates among the first K replace worse finished hypotheses
        just_finished = hits & top_k_mask[None, :]
        candidate = top_scores / (cur_len**penalty)  # length penalty over the new tokens
        full = is_finished.all(dim=-1, keepdim=True) & (search.early_stopping is True)
        candidate = candidate + full.float() * -1.0e9 + (~unsatisfied).float() * -1.0e9
        candidate = candidate + (~just_finished).float() * -1.0e9
        merged_scores = torch.cat([finished_scores, candidate], dim=1)
        choice = torch.topk(merged_scores, k=k)[1]
        finished = torch.cat([finished, top_running], dim=1).gather(1, choice[:, :, None].expand(-1, -1, max_length))
        finished_scores = merged_scores.gather(1, choice)
        finished_origin = torch.cat([finished_origin, top_origin], dim=1)
        finished_origin = finished_origin.gather(1, choice[:, :, None].expand(-1, -1, max_length - 1))
        is_finished = torch.cat([is_finished, just_finished], dim=1).gather(1, choice)
        reorder = running_origin[:, :, cur_len - 1].reshape(-1)  # (n K,) rows of this step's rows
        cur_len += 1
        # the early-stopping heuristic of `_check_early_stop_heuristic`
        length = (max_length - 1) if search.early_stopping == "never" and penalty > 0.0 else (cur_len - 1)
        best_running = running_scores[:, :1] / (length**penalty)
        worst_finished = torch.where(is_finished, finished_scores.min(dim=1, keepdim=True)[0], -1.0e9)
        unsatisfied = unsatisfied & (best_running > worst_finished).any(dim=-1, keepdim=True)
        done = ~unsatisfied[:, 0] | (is_finished.all(dim=-1) & (search.early_stopping is True))
        stop = bool(done.all()) or bool(hits.all())
        if stop or bool(done.any()):
            out = torch.arange(n) if stop else done.nonzero().squeeze(1)
            out_sequences[alive[out]] = finished[out]
            out_origin[alive[out]] = finished_origin[out]
        if stop:
            break
        if bool(done.any()):
            kept = (~done).nonzero().squeeze(1)
            rows_kept = (reorder.view(n, k)[kept]).reshape(-1)
            rows.keep(rows_kept, same_source=False)
            alive, running, running_scores, running_origin = alive[kept], running[kept], running_scores[kept], running_origin[kept]  # fmt: skip
            finished, finished_scores, finished_origin = finished[kept], finished_scores[kept], finished_origin[kept]
            is_finished, unsatisfied = is_finished[kept], unsatisfied[kept]
            # the beam indices of past steps now number other rows; only whether they are -1 is read again
        else:
            rows.keep(reorder, same_source=True)
    best_sequences = out_sequences[:, 0]  # (B, max_length)
    generated = (out_origin[:, 0] + 1).bool().sum(dim=1).max()
    return best_sequences[:, : 1 + int(generated)]


def generate_with(decoder, model, input_ids, attention_mask=None, **kwargs) -> torch.LongTensor:
    """Encode with ``model``'s own encoder (torch), then search with ``decoder.rows`` (see `OnnxDecoder.generate`).
    The same length caps and multi-task start token as `SyntaxMTForConditionalGeneration.generate`."""
    search, inputs = resolve_search(model, "onnxruntime", kwargs)
    with torch.inference_mode():
        encoded = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask, return_dict=True, **inputs)
        memory = encoded.last_hidden_state  # (B, S, D)
        rows = decoder.rows(memory, attention_mask, repeat=search.num_beams)  # sentence-major beams, as generate's
        run = beam_search if search.num_beams > 1 else greedy_search
        return run(rows, input_ids.shape[0], search)


__all__ = ["Rows", "Search", "beam_search", "generate_with", "greedy_search", "resolve_search"]
