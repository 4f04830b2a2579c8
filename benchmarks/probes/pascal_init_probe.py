"""Issue 12 item 5: is PASCAL inert at initialisation? A PASCAL model and a vanilla one built from the same seed
(PASCAL adds no parameter, so the weights are identical) are run on 32 Multi30k val pairs with their spaCy parses;
prints the largest logit difference and how far the PASCAL heads' attention is from uniform, for Marian's normal init
(std 0.02) and fairseq's Xavier init (`attention_init="xavier"`). Needs the study's tokenizer
(`python benchmarks/studies/multi30k_study.py` trains it first under runs/multi30k_study/).

    python benchmarks/probes/pascal_init_probe.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from transformers import AutoTokenizer

from benchmarks.common import DATA, ROOT
from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor, read_parallel_conllu

torch.set_num_threads(1)
tok = AutoTokenizer.from_pretrained(str(ROOT / "runs" / "multi30k_study" / "tokenizer-8000"))
D = DATA
ds = read_parallel_conllu(f"{D}/multi30k-parsed/val.en.conllu.gz", f"{D}/multi30k/val.de").select(range(32))
fn = SyntaxMTPreprocessor(tok, source_parse_column="source_parse")
ds = ds.map(fn, batched=True, remove_columns=ds.column_names)
dims = dict(
    vocab_size=len(tok),
    d_model=256,
    encoder_layers=3,
    decoder_layers=3,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=1024,
    decoder_ffn_dim=1024,
    pad_token_id=tok.pad_token_id,
    eos_token_id=tok.eos_token_id,
    decoder_start_token_id=tok.pad_token_id,
    scale_embedding=True,
    activation_function="relu",
)
batch = DataCollatorForSyntaxMT(tok)([dict(r) for r in ds])
for init in ("normal", "xavier"):
    out = {}
    for name, extra in (("vanilla", {}), ("pascal", {"encoder_pascal_heads": [2, 0, 0]})):
        torch.manual_seed(0)
        m = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**dims, attention_init=init, **extra)).eval()
        kw = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "labels")}
        if name == "pascal":
            kw["parent_positions"] = batch["parent_positions"]
        with torch.no_grad():
            o = m(**kw, output_attentions=True)
        out[name] = o
    diff = (out["vanilla"].logits - out["pascal"].logits).abs().max().item()
    att = out["pascal"].encoder_attentions[0][:, :2]  # (B, 2, S, S) the PASCAL heads
    mask = batch["attention_mask"].bool()
    n = mask.sum(1).float()
    # how far from uniform: max attention weight per query, averaged over real queries, vs 1/n
    maxw = att.max(-1).values.mean(1)  # (B, S)
    ratio = ((maxw * n[:, None]) * mask).sum() / mask.sum()
    print(
        f"init={init}: max |logit diff| PASCAL vs vanilla (same seed, 32 val pairs) = {diff:.3g}; "
        f"PASCAL heads' largest weight per query = {ratio:.2f} x uniform"
    )
