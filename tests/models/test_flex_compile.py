"""FlexAttention's compiled kernel stays compiled through a training run (issue 48).

A model with two PASCAL layers of different head spans trains on token batches of changing shape from the
length-bucketing `TokenBatchSampler`, with and without padding, with no-grad evaluation every few steps and bf16
autocast switched on and off; the number of graphs dynamo compiles stays small and its recompile limit is never hit.

What the CPU proves and what it does not: dynamo's guards (which decide when a new graph is compiled) are made by its
front end, the same for every backend, so compiling with `backend="aot_eager"` on the CPU counts the graphs the
CUDA run makes up to what Inductor adds itself (e.g. a guard on a length crossing a block size), which only a GPU
shows. FlexAttention has no CPU backward (its argument check refuses inputs that need a gradient on the CPU); under
`aot_eager` the higher-order op's reference backward runs, so the test lifts that check and trains with gradients.
"""

import logging
import types
import warnings

import pytest
import torch
from kernel_calls import count_calls, count_compiled_calls
from tiny_config import EOS, PAD, TINY
from torch._dynamo.utils import counters
from torch.utils.data import DataLoader

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt import flex as fused_kernels  # the opt-in FlexAttention: importing it switches it on
from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.training.batching import TokenBatchSampler

flex_module = pytest.importorskip("torch.nn.attention.flex_attention", reason="needs torch >= 2.5 (FlexAttention)")

PASCAL = dict(encoder_pascal_heads=[2, 1])  # two PASCAL layers of different head spans


class DynamoLimit(logging.Handler):
    """Collects dynamo's "hit config.recompile_limit" warnings."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.hits = []

    def emit(self, record):
        if "hit config." in record.getMessage():
            self.hits.append(record.getMessage().splitlines()[0])


@pytest.fixture
def compiled_flex_on_cpu(monkeypatch):
    """The compiled FlexAttention path on the CPU: `aot_eager` instead of Inductor, the CPU counted as a device with a
    compiled flex, and flex's CPU refusal of gradients lifted (the reference backward runs under `aot_eager`); fresh
    dynamo caches and counters, and dynamo's limit warnings collected."""
    check = flex_module._validate_device

    def validate_device(query, key, value):
        if query.device.type == "cpu":
            return check(query.detach(), key.detach(), value.detach())
        return check(query, key, value)

    monkeypatch.setattr(flex_module, "_validate_device", validate_device)
    monkeypatch.setattr(fused_kernels, "COMPILED_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(fused_kernels, "COMPILE_OPTIONS", {**fused_kernels.COMPILE_OPTIONS, "backend": "aot_eager"})
    fused_kernels.reset()
    torch._dynamo.reset()
    counters.clear()
    limit = DynamoLimit()
    logging.getLogger("torch._dynamo").addHandler(limit)
    yield limit
    logging.getLogger("torch._dynamo").removeHandler(limit)
    fused_kernels.reset()
    torch._dynamo.reset()


def make_pairs(n, seed=0, long=()):
    """`n` sentence pairs of 3..12 tokens (many of equal length, so that some token batches have no padding) with
    parent positions inside each sentence (EOS: itself), and pairs of the lengths in `long`."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 13, (n,), generator=g).tolist() + list(long)
    rows = []
    for L in lengths:
        ids = torch.randint(3, 99, (L,), generator=g)
        ids[-1] = EOS
        parents = (torch.rand(L, generator=g) * (L - 1) * 2).round() / 2  # middle positions: x or x.5
        parents[-1] = L - 1
        target = torch.randint(3, 99, (max(L - 1, 2),), generator=g)
        target[-1] = EOS
        rows.append(dict(input_ids=ids.tolist(), parent_positions=parents.tolist(), labels=target.tolist()))
    return rows


def loader(rows, model, max_tokens):
    """Token batches (at most `max_tokens` padded tokens), padded by the package's collator."""
    lengths = [max(len(r["input_ids"]), len(r["labels"])) for r in rows]
    sampler = TokenBatchSampler(lengths, max_tokens=max_tokens, seed=0)
    tokenizer = types.SimpleNamespace(pad_token_id=PAD, padding_side="right")
    collate = DataCollatorForSyntaxMT(tokenizer, model=model)

    def with_mask(features):
        return collate([{**f, "attention_mask": [1] * len(f["input_ids"])} for f in features])

    return DataLoader(rows, batch_sampler=sampler, collate_fn=with_mask)


def run(model, batches, eval_every=5, bf16_every=4):
    """Train on `batches` (SGD, gradients), a no-grad evaluation forward on the next batch every `eval_every` steps,
    bf16 autocast on for `bf16_every` steps, then off for as many; returns what ran: the (B, S) of every step,
    whether it had padding, and the number of training and evaluation steps per autocast setting."""
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    seen = {"shapes": set(), "padded": 0, "unpadded": 0, "train": set(), "eval": set()}
    batches = list(batches)
    for step, batch in enumerate(batches):
        bf16 = (step // bf16_every) % 2 == 1
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        seen["shapes"].add(tuple(batch["input_ids"].shape))
        seen["padded" if (batch["attention_mask"] == 0).any() else "unpadded"] += 1
        seen["train"].add(bf16)
        if step % eval_every == eval_every - 1:
            model.eval()
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                model(**batches[(step + 1) % len(batches)])
            seen["eval"].add(bf16)
    return seen


def pascal_calls_expected(batches, eval_every=5):
    """The PASCAL attention calls of a run: 2 layers per forward, training steps and evaluations."""
    n = len(batches)
    return 2 * (n + n // eval_every)


@pytest.mark.parametrize("kernel", ["auto", "fused"])
def test_pascal_stays_compiled_through_a_run_of_changing_token_batches(compiled_flex_on_cpu, monkeypatch, kernel):
    """>= 30 token batches of changing (B, S): at most 4 graphs (grad / no grad x fp32 / bf16), the limit never hit,
    no fallback, and every PASCAL call whose batch has more than one sentence ran the compiled kernel."""
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, **PASCAL, syntax_attention_kernel=kernel))
    rows = make_pairs(200, long=(40, 41))  # the long pairs make batches of one sentence
    batches = list(loader(rows, model, max_tokens=48))
    calls = count_calls(monkeypatch)
    compiled = count_compiled_calls(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen = run(model, batches)
    assert len(batches) >= 30 and len(seen["shapes"]) >= 12
    assert seen["padded"] and seen["unpadded"] and seen["train"] == seen["eval"] == {False, True}
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert compiled_flex_on_cpu.hits == []
    graphs = counters["stats"]["unique_graphs"]
    singles = sum(b["input_ids"].shape[0] == 1 for b in batches)
    assert singles >= 2
    train_calls = 2 * (len(batches) - singles)  # a batch of one sentence runs eager (a size-1 dimension is a graph)
    if kernel == "auto":  # evaluation (no grad) runs eager: graphs for fp32 and bf16 training only
        assert graphs <= 2 and calls["flex"] == compiled["calls"] == train_calls
    else:
        assert graphs <= 4 and calls["flex"] == compiled["calls"] >= train_calls + 2 * 4


def test_pascal_stays_compiled_fast(compiled_flex_on_cpu, monkeypatch):
    """The run above in small (fp32 only): 8 batches of changing shape, training and no-grad evaluation, one graph
    for each; the compiled kernel's gradients equal the eager path's on the first batch."""
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, **PASCAL, syntax_attention_kernel="fused"))
    batches = list(loader(make_pairs(60, seed=1), model, max_tokens=40))[:8]
    grads = {}
    for kernel in ("eager", "fused"):
        model.config.syntax_attention_kernel = kernel
        model.zero_grad()
        model.train()(**batches[0]).loss.backward()
        grads[kernel] = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    for name, grad in grads["eager"].items():
        torch.testing.assert_close(grads["fused"][name], grad, atol=1e-5, rtol=1e-4, msg=name)
    compiled = count_compiled_calls(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen = run(model, batches, eval_every=3, bf16_every=len(batches))
    assert len(seen["shapes"]) >= 5 and seen["train"] == seen["eval"] == {False}
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert compiled_flex_on_cpu.hits == [] and counters["stats"]["unique_graphs"] <= 2
    assert compiled["calls"] == pascal_calls_expected(batches, eval_every=3)


def test_the_recompile_limit_hit_warns_once_and_runs_eager(compiled_flex_on_cpu, monkeypatch):
    """With dynamo's limit at 1 graph, a call that needs a second one (with gradient after one without) takes the eager
    path with one warning in the package's words, gives the eager path's values, and is not a failure: the no-grad
    graph still runs compiled afterwards."""
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, **PASCAL, syntax_attention_kernel="fused")).eval()
    batch = next(iter(loader(make_pairs(20, seed=2), model, max_tokens=40)))
    compiled = count_compiled_calls(monkeypatch)
    with torch._dynamo.config.patch(recompile_limit=1):
        with torch.no_grad():
            model(**batch)
        assert compiled["calls"] == 2
        model.config.syntax_attention_kernel = "eager"
        eager = model(**batch).logits
        model.config.syntax_attention_kernel = "fused"
        with pytest.warns(RuntimeWarning, match=r"recompile limit .*recompile_limit \(now 1\)") as caught:
            fused = model(**batch).logits
            model(**batch)
        assert len(caught) == 1 and compiled["calls"] == 2 and not fused_kernels._failed
        torch.testing.assert_close(fused, eager, atol=1e-5, rtol=0)
        with torch.no_grad():
            model(**batch)
        assert compiled["calls"] == 4
