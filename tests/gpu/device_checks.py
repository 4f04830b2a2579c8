"""Device checks (issue 43) shared by the GPU-only tests (`@pytest.mark.gpu`, run on CUDA by `scripts/gpu_check.sh`)
and their CPU twins (run by the fast suite everywhere), so that the code of every GPU check runs on any machine.

Each check takes the device it runs on; the reference it compares with is computed independently: the fp32 model on
the CPU, generation by hand on the device, the same sentence without padding. The tiny-config tester's methods,
model and batch come from `tests/models/test_every_method.py` (one list of settings for every registered method).
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import pytest
import torch

_spec = importlib.util.spec_from_file_location(
    "every_method_tester", Path(__file__).resolve().parents[1] / "models" / "test_every_method.py"
)
tester = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tester)

METHODS = tester.BUILTIN
#: CUDA fp32 against CPU fp32 on the tiny models: the same math in another summation order (no TF32: torch leaves
#: `torch.backends.cuda.matmul.allow_tf32` off); measured differences are ~1e-6, a wrong kernel is far outside
FP32_ATOL = FP32_RTOL = 1e-4


def devices() -> list:
    """`cpu` (every machine) and `cuda` (marked `gpu`: skipped with the reason where torch sees no CUDA)."""
    return [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def autocast(device: str, dtype: torch.dtype):
    """bf16 autocast on the device's type; fp32: nothing."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)


def on(batch: dict, device: str) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


def parameter_devices(model) -> set[torch.device]:
    return {p.device for p in model.parameters()} | {b.device for b in model.buffers()}


def same_device(a: torch.device | str, b: torch.device | str) -> bool:
    """`cuda` and `cuda:0` are the same device (the current one); `cpu` is `cpu`."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    current = torch.cuda.current_device() if a.type == "cuda" else None
    return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)


# ----------------------------------------------------------------------------------------------------------------
# every registered method: forward/backward and generation on the device
# ----------------------------------------------------------------------------------------------------------------
def check_forward_backward(name: str, device: str, dtype: torch.dtype) -> None:
    """The method's loss and logits on `device` (under `dtype` autocast) against the fp32 model on the CPU; the
    backward pass gives finite fp32 gradients (in fp32: equal to the CPU's), and the model stays on `device`."""
    batch = tester.training_batch()
    reference = tester.build(name).train()
    expected = reference(**batch)
    expected.loss.backward()
    model = tester.build(name).to(device).train()
    with autocast(device, dtype):
        out = model(**on(batch, device))
    assert torch.isfinite(out.loss), (name, device, dtype, out.loss)
    if dtype == torch.float32:
        torch.testing.assert_close(out.logits.cpu(), expected.logits, rtol=FP32_RTOL, atol=FP32_ATOL)
        torch.testing.assert_close(out.loss.cpu(), expected.loss, rtol=FP32_RTOL, atol=FP32_ATOL)
    else:
        assert not torch.equal(out.logits.float().cpu(), expected.logits)  # autocast really ran in bf16
        torch.testing.assert_close(out.loss.float().cpu(), expected.loss, rtol=tester.BF16_LOSS_RTOL, atol=0)
    out.loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert grads, name
    for n, g in grads.items():
        assert g.dtype == torch.float32 and torch.isfinite(g).all(), (name, n)
    if dtype == torch.float32:
        want = {n: p.grad for n, p in reference.named_parameters() if p.grad is not None}
        assert set(grads) == set(want)
        for n, g in grads.items():
            torch.testing.assert_close(g.cpu(), want[n], rtol=1e-3, atol=FP32_ATOL, msg=lambda m, n=n: f"{n}: {m}")
    assert all(same_device(d, device) for d in parameter_devices(model))


def check_cached_generation(name: str, device: str, dtype: torch.dtype) -> None:
    """Greedy and beam-3 generation with the cache equal generation without it on `device` (under `dtype`
    autocast); in fp32 the greedy tokens are the CPU's."""
    batch = on(tester.generation_inputs(tester.training_batch()), device)
    model = tester.build(name).to(device)
    kwargs = dict(max_new_tokens=5, do_sample=False)
    with torch.no_grad(), autocast(device, dtype):
        cached = model.generate(**batch, num_beams=1, use_cache=True, **kwargs)
        full = model.generate(**batch, num_beams=1, use_cache=False, **kwargs)
        beams = model.generate(**batch, num_beams=3, use_cache=True, **kwargs)
        beams_full = model.generate(**batch, num_beams=3, use_cache=False, **kwargs)
    assert cached.device.type == torch.device(device).type
    assert torch.equal(cached, full), (name, device, dtype)
    assert torch.equal(beams, beams_full), (name, device, dtype)
    if dtype == torch.float32:
        with torch.no_grad():
            on_cpu = tester.build(name).generate(**tester.generation_inputs(tester.training_batch()), num_beams=1,
                                                 **kwargs)  # fmt: skip
        assert torch.equal(cached.cpu(), on_cpu), (name, device)


# ----------------------------------------------------------------------------------------------------------------
# translating: the pipeline, translate_document, the CLI
# ----------------------------------------------------------------------------------------------------------------
DOCUMENT = [
    "Le chat noir dort sur le canapé du salon.",
    "Il rêve de souris.",
    "Une femme lit un livre dans le jardin.",
    "Elle sourit.",
]


def save_document_model(directory: Path, context_sentences: int = 1):
    """A tiny random document-level model (context k) and its tokenizer, saved to `directory`; returns both."""
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    tokenizer = train_tokenizer(DOCUMENT * 20, vocab_size=120, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, context_sentences=context_sentences,
                          init_std=1.0)  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 8
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model, tokenizer


def by_hand(model, tokenizer, sentences: list[str], k: int, **generate_kwargs) -> list[str]:
    """One sentence at a time on the model's own device, the context = the previous k sentences."""
    device = model.device
    out = []
    for i, text in enumerate(sentences):
        kwargs = {}
        context = [t for previous in sentences[max(0, i - k) : i] for t in tokenizer(previous)["input_ids"]]
        if context:
            kwargs = {"context_input_ids": torch.tensor([context], device=device),
                      "context_attention_mask": torch.ones(1, len(context), device=device)}  # fmt: skip
        with torch.no_grad():
            ids = model.generate(input_ids=torch.tensor([tokenizer(text)["input_ids"]], device=device), **kwargs,
                                 **generate_kwargs)  # fmt: skip
        out.append(tokenizer.decode(ids[0], skip_special_tokens=True))
    return out


def check_pipeline_on(device: str, directory: Path) -> None:
    """`pipeline("syntax-translation", model=DIR, device=...)` runs on that device, and translates as generation by
    hand with the pipeline's own model: a document (document-level model) or a batch of sentences (sentence-level)."""
    from transformers import pipeline

    import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")

    pipe = pipeline("syntax-translation", model=str(directory), device=device)
    assert same_device(pipe.device, device) and all(same_device(d, device) for d in parameter_devices(pipe.model))
    k = pipe.model.config.context_sentences
    if k:
        got = [r["translation_text"] for r in pipe.translate_document(DOCUMENT, batch_size=2)]
    else:
        got = [r["translation_text"] for r in pipe(DOCUMENT, batch_size=2)]
    assert got == by_hand(pipe.model, pipe.tokenizer, DOCUMENT, k=k)
    assert all(same_device(d, device) for d in parameter_devices(pipe.model))


def check_translate_document_leaves_the_model(model_device: str, directory: Path) -> None:
    """`model.translate_document(...)` translates on the device the caller put the model on and leaves it there
    (issue 43: given no device, transformers' pipeline moved a CPU model to the GPU in place), every buffer too."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_syntax_mt  # noqa: F401

    model = AutoModelForSeq2SeqLM.from_pretrained(directory).to(model_device).eval()
    tokenizer = AutoTokenizer.from_pretrained(directory)
    before = parameter_devices(model)
    got = [r["translation_text"] for r in model.translate_document(DOCUMENT, tokenizer)]
    assert parameter_devices(model) == before, f"translate_document moved the model from {before}"
    # the caller's own tensors, made where the model was put, still work, and give the same translations
    assert got == by_hand(model, tokenizer, DOCUMENT, k=model.config.context_sentences)


def check_cli_translate(device: str, bf16: bool, directory: Path, tmp_path: Path, capsys) -> None:
    """`hf-syntax-mt translate --device D [--bf16]` says on stderr which device it used (a line `device: ...`)
    and writes one translation per input line; in fp32 they are the pipeline's on that device."""
    from transformers import pipeline

    from hf_syntax_mt.cli import main

    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(s + "\n" for s in DOCUMENT), encoding="utf-8")
    capsys.readouterr()
    flags = ["--device", device] + (["--bf16"] if bf16 else [])
    code = main(["translate", "--model", str(directory), "--input", str(source), "--output", str(output),
                 "--num-beams", "2", "--batch-size", "2", *flags])  # fmt: skip
    assert code == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("device:")]
    assert said and torch.device(device).type in said[-1], said
    got = output.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(got) == len(DOCUMENT) and all(got), got
    if not bf16:
        pipe = pipeline("syntax-translation", model=str(directory), device=device)
        assert got == [r["translation_text"] for r in pipe(DOCUMENT, num_beams=2, batch_size=2)]


# ----------------------------------------------------------------------------------------------------------------
# training: one Trainer step; padded batches at the lengths of the known cuDNN SDPA bugs
# ----------------------------------------------------------------------------------------------------------------
def check_trainer_step(name: str, device: str, tmp_path: Path) -> None:
    """One bf16 `SyntaxMTTrainer` step on `device` (the Trainer's own choice where CUDA is there, `use_cpu` on the
    CPU): a finite loss, the method's parameters changed, the weights still fp32 and on the device."""
    from datasets import Dataset
    from transformers import Seq2SeqTrainingArguments

    from hf_syntax_mt.training import SyntaxMTTrainer

    batch = tester.training_batch()
    rows = [{k: v[i].tolist() for k, v in batch.items()} for i in range(2)]

    def collate(features):
        return {k: torch.tensor([f[k] for f in features]) for k in features[0]}

    model = tester.build(name).train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, learning_rate=1e-2, report_to=[],
        save_strategy="no", logging_steps=1, use_cpu=device == "cpu", bf16=True, seed=0,
    )  # fmt: skip
    trainer = SyntaxMTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), data_collator=collate)
    assert same_device(trainer.args.device, device)
    trainer.train()
    log = next(e for e in trainer.state.log_history if "loss" in e)
    assert torch.isfinite(torch.tensor(log["loss"]))
    assert all(p.dtype == torch.float32 and same_device(p.device, device) for p in model.parameters())
    changed = {n for n, p in model.named_parameters() if not torch.equal(p.detach().cpu(), before[n])}
    assert changed, name
    fragment = {"alignment_bias": "alignment_bias", "fertility": "global_fertility", "input_features":
                "feature_embeddings", "document_context": "context_attn", "biaffine": "biaffine_u"}.get(name)  # fmt: skip
    assert fragment is None or any(fragment in n for n in changed), (name, fragment)


#: sequence lengths of the checks below: 64 and 192 are where cuDNN's SDPA backward with an explicit mask gave NaN
#: `grad_q` on H100 (seq_len % 128 == 64, pytorch #196678); 128 beside them as a control
SDPA_LENGTHS = (64, 128, 192)


def padded_pairs(length: int, vocab_size: int, seed: int = 0) -> dict:
    """4 pairs padded to `length` on both sides (rows of length, length - 5, length // 2 + 3, 9). Padded positions
    hold random tokens, not `<pad>`: only the mask hides them, so a mask that is misread shows."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([length, length - 5, length // 2 + 3, 9])
    pos = torch.arange(length).expand(4, length)  # (B, L)
    real = pos < lengths[:, None]
    ids = torch.randint(3, vocab_size, (4, length), generator=g)
    ids = torch.where(pos == (lengths - 1)[:, None], 0, ids)  # </s> = 0 at each row's end
    labels = torch.randint(3, vocab_size, (4, length), generator=g)
    labels = torch.where(pos == (lengths - 1)[:, None], 0, labels).where(real, -100)
    return {"input_ids": ids, "attention_mask": real.long(), "labels": labels, "decoder_attention_mask": real.long()}


def sdpa_model(kind: str, length: int):
    """`kind`: "marian" (transformers' `MarianMTModel`, SDPA), "ours" (no method) or "pascal" (2 of 2 heads of
    layer 0 PASCAL). Head dimension 64 (the cuDNN backend's), 2+2 layers."""
    from transformers import MarianConfig, MarianMTModel

    from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration

    dims = dict(vocab_size=300, d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=256, decoder_ffn_dim=256,
                max_position_embeddings=max(256, length), pad_token_id=1, eos_token_id=0, decoder_start_token_id=1,
                forced_eos_token_id=None, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                init_std=0.1)  # fmt: skip
    torch.manual_seed(0)
    if kind == "marian":
        config = MarianConfig(**dims)
        config._attn_implementation = "sdpa"
        return MarianMTModel(config)
    options = dict(encoder_pascal_heads=[2, 0]) if kind == "pascal" else {}
    return SyntaxMTForConditionalGeneration(SyntaxMTConfig(**dims, **options))


def pascal_inputs(batch: dict) -> dict:
    """Every token's parent: the previous token (the first: itself), padding and `</s>` their own position."""
    pos = torch.arange(batch["input_ids"].shape[1]).expand_as(batch["input_ids"]).float()  # (B, S)
    real = batch["attention_mask"].bool() & (batch["input_ids"] != 0)
    return {**batch, "parent_positions": torch.where(real & (pos > 0), pos - 1, pos)}


def check_padded_training(kind: str, device: str, length: int, steps: int = 3) -> None:
    """A few AdamW steps under bf16 autocast on a padded batch (explicit masks in every attention) at `length`:
    every step's loss and every gradient finite (pytorch #196678), and a padded sentence's logits equal to the same
    sentence alone without padding (a bf16 query with a misread mask lets the padding in, pytorch #191612)."""
    model = sdpa_model(kind, length).to(device).train()
    batch = padded_pairs(length, model.config.vocab_size)
    if kind == "pascal":
        batch = pascal_inputs(batch)
    batch = on(batch, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(steps):
        with autocast(device, torch.bfloat16):
            loss = model(**batch).loss
        assert torch.isfinite(loss), (kind, length, step, loss)
        loss.backward()
        for n, p in model.named_parameters():
            assert p.grad is None or torch.isfinite(p.grad).all(), (kind, length, step, n)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    model.eval()
    row = 2  # a padded row
    n = int(batch["attention_mask"][row].sum())
    alone = {k: v[row : row + 1, :n] for k, v in batch.items()}
    with torch.no_grad(), autocast(device, torch.bfloat16):
        padded = model(**batch).logits[row, :n].float()  # (n, V)
        single = model(**alone).logits[0].float()  # (n, V)
    # measured on the CPU (init_std 0.1, length 64): bf16 rounding moves these logits by 0.5-0.6% of their norm, the
    # padding let in (an all-ones mask) by 26-36%
    error = (padded - single).norm() / single.norm()
    assert error < 0.05, (kind, device, length, float(error))
