"""Counting the fused kernels' calls (`SyntaxMTAttention._flex`, `._sdpa_bias`): which path a forward took."""

from hf_syntax_mt.modeling_layers import SyntaxMTAttention


def count_calls(monkeypatch):
    """Count the fused kernels' calls."""
    calls = {"flex": 0, "bias": 0}
    flex, bias = SyntaxMTAttention._flex, SyntaxMTAttention._sdpa_bias

    def counted_flex(self, *args, **kwargs):
        calls["flex"] += 1
        return flex(self, *args, **kwargs)

    def counted_bias(self, *args, **kwargs):
        calls["bias"] += 1
        return bias(self, *args, **kwargs)

    monkeypatch.setattr(SyntaxMTAttention, "_flex", counted_flex)
    monkeypatch.setattr(SyntaxMTAttention, "_sdpa_bias", counted_bias)
    return calls


def count_compiled_calls(monkeypatch):
    """Count the FlexAttention calls that ran the compiled kernel (`fused_kernels.flex` returned on a compiled
    device; where the compiled kernel did not run it raises `NotCompiled`)."""
    from hf_syntax_mt import flex as fused_kernels

    calls = {"calls": 0}
    flex = fused_kernels.flex

    def counted(query, *args):
        out = flex(query, *args)
        calls["calls"] += query.device.type in fused_kernels.COMPILED_DEVICES
        return out

    monkeypatch.setattr(fused_kernels, "flex", counted)
    return calls
