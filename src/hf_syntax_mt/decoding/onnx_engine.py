"""The `onnxruntime` engine: the model's own encoder in torch (every method, PASCAL's parse included), then Marian's
decoder as one ONNX graph with a key/value cache (`MarianDecoderStep`, exported once with
``torch.onnx.export(dynamo=True)`` and cached on disk) run by ONNX Runtime, searched by `decoding.search` (the token
ids `generate` gives)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from ..errors import UserError
from .marian_step import MarianDecoderStep, check_marian_decoder, memory_mask
from .search import generate_with

#: where exported decoders are kept (one file per set of decoder weights); `HF_SYNTAX_MT_CACHE` moves it
CACHE_ENV = "HF_SYNTAX_MT_CACHE"


def default_cache_dir() -> Path:
    root = os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "hf_syntax_mt")
    return Path(root).expanduser() / "onnx"


def _require_onnx():
    try:  # (in `try`: a model directory's remote code needs neither package to load)
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401  (torch.onnx.export(dynamo=True) needs it)
    except ImportError as e:
        raise UserError(f"engine='onnxruntime' needs onnxruntime and onnxscript ({e}): pip install "
                        "'hf-syntax-mt[deploy]' (or onnxruntime onnxscript), or use engine='generate'") from None  # fmt: skip


class _Export(torch.nn.Module):
    """`MarianDecoderStep` with its caches as separate arguments (ONNX inputs `cross_i`, `past_i`)."""

    def __init__(self, step: MarianDecoderStep):
        super().__init__()
        self.step = step

    def forward(self, tokens, position, memory_mask, cross, past):
        return self.step(tokens, position, memory_mask, cross, past)


class OnnxDecoder:
    """A model's decoder step in ONNX Runtime; `generate(...)` translates as `model.generate(...)` does.

    Args:
        model: a `SyntaxMTForConditionalGeneration` whose decoder is Marian's (any encoder option), or a
            `MarianMTModel`; refused (`UserError`) otherwise.
        threads: ONNX Runtime's intra-op threads (default: torch's current number of threads).
        cache_dir: where the exported graph is kept, keyed by the decoder's weights (default `default_cache_dir()`;
            `None` with ``cache=False``: export to memory every time).
    """

    def __init__(self, model, threads: int | None = None, cache_dir: str | Path | None = None, cache: bool = True):
        _require_onnx()
        try:
            import onnxruntime as ort
        except ImportError:
            raise

        check_marian_decoder(model.config, "onnxruntime")
        if model.device.type != "cpu":
            raise UserError(f"engine='onnxruntime' runs on the CPU, but the model is on {model.device}: use "
                            "engine='generate' there (or CTranslate2 on CUDA, for an exported model)")  # fmt: skip
        self.model = model
        self.step = MarianDecoderStep(model).eval()
        config = model.config
        self.layers, self.heads = config.decoder_layers, config.decoder_attention_heads
        self.head_dim = config.d_model // self.heads
        graph = self._graph(Path(cache_dir) if cache_dir is not None else default_cache_dir(), cache)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def _key(self) -> str:
        """A digest of what the graph depends on: the step's code, the library versions and the weights."""
        import inspect

        import transformers

        try:
            import onnxruntime
        except ImportError:
            raise
        digest = hashlib.sha256(inspect.getsource(MarianDecoderStep).encode())
        for text in (torch.__version__, transformers.__version__, onnxruntime.__version__):
            digest.update(text.encode())
        for name, tensor in sorted(self.step.state_dict().items()):
            digest.update(name.encode())
            digest.update(str(tuple(tensor.shape)).encode())
            digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        digest.update(type(self.step.layers[0].activation_fn).__name__.encode())
        return digest.hexdigest()[:32]

    def _graph(self, cache_dir: Path, cache: bool):
        """The exported decoder step: a cached file's path, or the serialised graph."""
        path = cache_dir / f"decoder-{self._key()}.onnx" if cache else None
        if path is not None and path.is_file():
            return str(path)
        proto = self._export()
        if path is None:
            return proto
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(proto)
        partial.replace(path)  # atomic: a concurrent reader never sees half a file
        return str(path)

    def _export(self) -> bytes:
        import logging
        import warnings

        n, s, t = 2, 7, 3  # example sizes (not 0 or 1, which the exporter would specialise on)
        d, h, layers = self.head_dim, self.heads, self.layers
        example = (
            torch.zeros(n, 1, dtype=torch.long), torch.tensor([t]), torch.zeros(n, 1, 1, s),
            [torch.zeros(n, h, s, d) for _ in range(2 * layers)], [torch.zeros(n, h, t, d) for _ in range(2 * layers)],
        )  # fmt: skip
        rows, source, target = torch.export.Dim("rows"), torch.export.Dim("source"), torch.export.Dim("target")
        shapes = (
            {0: rows}, None, {0: rows, 3: source},
            [{0: rows, 2: source}] * (2 * layers), [{0: rows, 2: target}] * (2 * layers),
        )  # fmt: skip
        quiet = logging.getLogger("torch.onnx")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = torch.onnx.export(
                    _Export(self.step), example, dynamic_shapes=shapes, dynamo=True, optimize=False, verbose=False
                )
        finally:
            quiet.setLevel(level)
        return program.model_proto.SerializeToString()

    def rows(self, memory: torch.Tensor, attention_mask: torch.Tensor | None) -> _OrtRows:
        """The decoder rows of an encoder output `(N, S, D)` (one row per sentence or beam)."""
        with torch.inference_mode():
            cross = [c.contiguous().numpy() for c in self.step.cross_cache(memory)]
            mask = memory_mask(attention_mask, memory).numpy()
        return _OrtRows(self, cross, mask)

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
        """`model.generate(input_ids, attention_mask, **kwargs)`'s token ids `(B, L)`, decoded by ONNX Runtime. The
        method inputs (e.g. `parent_positions`) go to the encoder; the generation options supported are those of
        `decoding.search.resolve_search` (greedy and beam search, lengths, forced and banned tokens)."""
        return generate_with(self, self.model, input_ids, attention_mask, **kwargs)


class _OrtRows:
    """The rows of one batch in ONNX Runtime: the cross-attention caches, the source mask and the self-attention
    caches, as numpy arrays (the session's inputs and outputs)."""

    def __init__(self, decoder: OnnxDecoder, cross, mask):
        import numpy as np

        self.decoder, self.cross, self.mask = decoder, cross, mask
        n = mask.shape[0]
        empty = np.zeros((n, decoder.heads, 0, decoder.head_dim), dtype=np.float32)
        self.past = [empty] * (2 * decoder.layers)

    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        import numpy as np

        arrays = [
            tokens.reshape(-1, 1).contiguous().numpy(),
            np.array([position], dtype=np.int64),
            self.mask,
            *self.cross,
            *self.past,
        ]
        outputs = self.decoder.session.run(None, dict(zip(self.decoder.input_names, arrays, strict=True)))
        self.past = outputs[1:]
        return torch.from_numpy(outputs[0])

    def keep(self, rows: torch.Tensor, same_source: bool) -> None:
        index = rows.numpy()
        self.past = [p[index] for p in self.past]
        if not same_source:
            self.cross = [c[index] for c in self.cross]
            self.mask = self.mask[index]


__all__ = ["CACHE_ENV", "OnnxDecoder", "default_cache_dir"]
