"""Where does a kept model's cross-attention put its weight, layer by layer? (issue 14, a diagnostic)

The symmetric unit of the alignment study reads AER 92.5 at its bonus layer and 64.6 one layer up. This reads each
decoder layer's cross-attention (heads averaged, as `align` reads it) on the first N test_2016_flickr pairs
(lower-cased and tokenised as in the study) and records, over the real target rows: the mean of each row's largest
weight, the share of rows whose largest weight is at least 0.99 (a hard pick), and, for a symmetric model, the share
of rows whose pick is reciprocal (the backward direction's row for the picked source token picks this target token
back), the pattern that maximises the trace bonus (Cohn et al. 2016, section Bilingual Symmetry: B = -tr(alpha_s->t
alpha_t->s)). It also records the first pair's token-level picks at every layer.

    python benchmarks/probes/symmetric_layer_probe.py --units symmetric-seed0 all_biases-seed0
    # -> benchmarks/results/alignment/layer_probe.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE  # noqa: E402
from benchmarks.common import DATA, write_json  # noqa: E402
from benchmarks.studies import alignment_study as study  # noqa: E402


def cross_attention(model, tokenizer, sources: list[str], targets: list[str]):
    """Head-averaged cross-attention of every decoder layer, `(L, B, J, I)`, with the real-row mask `(B, J)`."""
    import torch

    enc = tokenizer(sources, text_target=targets, return_tensors="pt", padding=True)
    labels = enc["labels"].masked_fill(enc["labels"] == tokenizer.pad_token_id, -100)
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels,
                    output_attentions=True)  # fmt: skip
    probs = torch.stack([a.mean(dim=1) for a in out.cross_attentions])  # (L, B, J, I)
    return probs, labels != -100, enc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--units", nargs="+", default=["symmetric-seed0"], help="kept models under --output-dir")
    p.add_argument("--pairs", type=POSITIVE, default=200, help="first N test_2016_flickr pairs")
    p.add_argument("--output-dir", default=str(study.ROOT / "runs" / "alignment_study"))
    p.add_argument("--results", default=str(study.RESULTS))
    p.add_argument("--data", default=str(DATA))
    a = p.parse_args(argv)
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_syntax_mt import SymmetricTranslationConfig

    torch.set_num_threads(1)
    args = study.parse_args(["--results", a.results, "--data", a.data, "--output-dir", a.output_dir])
    en, fr = (side[: a.pairs] for side in study.prepared_data(args)["test_2016_flickr"])
    units = {}
    for unit in a.units:
        model_dir = Path(a.output_dir) / unit / "model"
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        symmetric = isinstance(AutoConfig.from_pretrained(model_dir), SymmetricTranslationConfig)
        auto = AutoModel if symmetric else AutoModelForSeq2SeqLM  # the symmetric model is registered with AutoModel
        model = auto.from_pretrained(model_dir, attn_implementation="eager").eval()
        fwd, mask, enc = cross_attention(model.forward_model if symmetric else model, tokenizer, en, fr)
        peak, pick = fwd.max(dim=-1)  # (L, B, J)
        rows = mask.sum()
        shares = {
            "mean_peak_weight": peak[:, mask].mean(-1),
            "hard_pick_share": (peak[:, mask] >= 0.99).sum(-1) / rows,
        }
        if symmetric:  # backward rows are source positions; its inputs are the forward labels, so indices line up
            bwd, _, _ = cross_attention(model.backward_model, tokenizer, fr, en)
            returned = bwd.argmax(dim=-1).gather(2, pick)  # (L, B, J): the target row each pick's source row picks
            shares["reciprocal_share"] = (returned == torch.arange(fwd.shape[2]))[:, mask].sum(-1) / rows
        layers = [{"layer": layer, **{k: round(float(v[layer]), 4) for k, v in shares.items()}}
                  for layer in range(fwd.shape[0])]  # fmt: skip
        source = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        target = tokenizer.convert_ids_to_tokens(enc["labels"][0][mask[0]])
        example = {"source": en[0], "target": fr[0], "picks": {
            str(layer): [[target[j], source[int(pick[layer, 0, j])], round(float(peak[layer, 0, j]), 2)]
                         for j in range(len(target))] for layer in range(fwd.shape[0])}}  # fmt: skip
        units[unit] = {"symmetric": symmetric, "rows": int(rows), "layers": layers, "first_pair": example}
        print(unit, layers, flush=True)
    record = {"pairs": len(en), "split": "test_2016_flickr (lower-cased, tokenised as in the study)",
              "read": "forward direction, heads averaged, Naive-Att rows", "units": units,
              **study.software(), "commit": study.git_commit()}  # fmt: skip
    print(write_json(Path(a.results) / "layer_probe.json", record, indent=1, newline=True, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
