"""The `onnxruntime` engine: the model's own encoder in torch (every method, PASCAL's parse included), then Marian's
decoder as one ONNX graph with a key/value cache (`MarianDecoderStep`, exported once with
``torch.onnx.export(dynamo=True)`` and cached on disk) run by ONNX Runtime, searched by `decoding.search` (the token
ids `generate` gives)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import torch

from ..errors import UserError
from .marian_step import MarianDecoderStep, check_marian_decoder, memory_mask
from .search import generate_with

#: where exported decoders are kept (one file per set of decoder weights); `HF_SYNTAX_MT_CACHE` moves it
CACHE_ENV = "HF_SYNTAX_MT_CACHE"

logger = logging.getLogger("hf_syntax_mt.decoding")


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
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._new_session = lambda graph: ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        self.session = self._session(Path(cache_dir) if cache_dir is not None else default_cache_dir(), cache)
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

    def _session(self, cache_dir: Path, cache: bool):
        """The ONNX Runtime session of the decoder step: the cached graph where `check_onnx_cache_entry` passes it
        and ONNX Runtime loads it with the step's inputs and outputs; else (no entry, or one that fails: dropped with
        a warning naming it and why) the step exported again, and cached."""
        key = self._key()
        path = cache_dir / f"decoder-{key}.onnx" if cache else None
        if path is not None and (path.exists() or _record_of(path).exists()):
            reason = check_onnx_cache_entry(path, key)
            if reason is None:
                try:
                    session = self._new_session(str(path))
                    inputs, outputs = len(session.get_inputs()), len(session.get_outputs())
                    if (inputs, outputs) == (3 + 4 * self.layers, 1 + 2 * self.layers):
                        return session
                    reason = f"has {inputs} inputs and {outputs} outputs, not the decoder step's"
                except Exception as e:  # onnxruntime's own (InvalidProtobuf, InvalidGraph, Fail, ...): rebuilt
                    reason = f"ONNX Runtime cannot load ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
            logger.warning("ONNX decoder cache: dropped %s, which %s; exporting the decoder again (the cache is %s, "
                           "set by %s)", path, reason, cache_dir, CACHE_ENV)  # fmt: skip
            _drop(path)
        proto = self._export()
        if path is not None:
            _store(path, proto, key)
        return self._new_session(proto)

    def _export(self) -> bytes:
        import logging
        import warnings

        n, s, t = 2, 7, 3  # example sizes (not 0 or 1, which the exporter would specialise on)
        d, h, layers = self.head_dim, self.heads, self.layers
        example = (
            torch.zeros(n, 1, dtype=torch.long), torch.tensor([t]), torch.zeros(n, 1, 1, s),
            [torch.zeros((n, h, d, s) if i % 2 == 0 else (n, h, s, d)) for i in range(2 * layers)],  # keys transposed
            [torch.zeros((n, h, d, t) if i % 2 == 0 else (n, h, t, d)) for i in range(2 * layers)],  # (distinct tensors)
        )  # fmt: skip
        rows, source, target = torch.export.Dim("rows"), torch.export.Dim("source"), torch.export.Dim("target")
        shapes = (
            {0: rows}, None, {0: rows, 3: source},
            [{0: rows, 3: source}, {0: rows, 2: source}] * layers, [{0: rows, 3: target}, {0: rows, 2: target}] * layers,
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

    def rows(self, memory: torch.Tensor, attention_mask: torch.Tensor | None, repeat: int = 1) -> _OrtRows:
        """The decoder rows of an encoder output `(B, S, D)`, each sentence ``repeat`` times (its beams)."""
        with torch.inference_mode():
            cross = [c.numpy() for c in self.step.cross_cache(memory, repeat)]
            mask = memory_mask(attention_mask, memory)
            mask = (mask.repeat_interleave(repeat, dim=0) if repeat > 1 else mask).numpy()
            past = [p.numpy() for p in self.step.empty_past(mask.shape[0], memory)]
        return _OrtRows(self, cross, mask, past)

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
        """`model.generate(input_ids, attention_mask, **kwargs)`'s token ids `(B, L)`, decoded by ONNX Runtime. The
        method inputs (e.g. `parent_positions`) go to the encoder; the generation options supported are those of
        `decoding.search.resolve_search` (greedy and beam search, lengths, forced and banned tokens)."""
        return generate_with(self, self.model, input_ids, attention_mask, **kwargs)


class _OrtRows:
    """The rows of one batch in ONNX Runtime: the cross-attention caches, the source mask and the self-attention
    caches, as numpy arrays (the session's inputs and outputs)."""

    def __init__(self, decoder: OnnxDecoder, cross, mask, past):
        self.decoder, self.cross, self.mask, self.past = decoder, cross, mask, past

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


def _record_of(path: Path) -> Path:
    return path.with_suffix(".json")


def check_onnx_cache_entry(path: Path, key: str) -> str | None:
    """Why the cached decoder graph ``path`` cannot be used (None: it can): its record (``decoder-KEY.json``, written
    after the graph) must name this ``key`` and give the graph's size and sha256, so that a truncated, half-copied or
    replaced graph is found before ONNX Runtime reads it, and the graph must pass `onnx.checker`."""
    record_file = _record_of(path)
    if not path.is_file():
        return "has a record but no graph"
    try:
        record = json.loads(record_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"has no record {record_file.name} (an earlier version's entry, or one cut short while written)"
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        return f"has a record {record_file.name} that cannot be read ({type(e).__name__})"
    if not isinstance(record, dict) or record.get("key") != key:
        return f"has a record {record_file.name} of another decoder"
    size = path.stat().st_size
    if record.get("bytes") != size:
        return f"holds {size} bytes where its record says {record.get('bytes')!r} (truncated or replaced)"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if record.get("sha256") != digest.hexdigest():
        return "does not have the sha256 its record gives (damaged or replaced)"
    try:
        import onnx

        onnx.checker.check_model(str(path))
    except ImportError:  # onnxscript brings onnx; without it ONNX Runtime's load is the check
        pass
    except Exception as e:  # onnx's ValidationError, a protobuf DecodeError
        return f"is not a valid ONNX graph ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})"
    return None


def _drop(path: Path) -> None:
    for file in (path, _record_of(path)):
        try:
            file.unlink(missing_ok=True)
        except OSError as e:  # a read-only cache: the new graph is used from memory (`_store` says so)
            logger.warning("ONNX decoder cache: cannot delete %s (%s)", file, e.strerror)


def _store(path: Path, proto: bytes, key: str) -> None:
    """The graph and then its record, each written to a temporary file and renamed into place (atomic: a concurrent
    reader sees a whole file or none, and a graph without its record is rebuilt). A cache that cannot be written is
    a warning: the graph is used from memory."""
    record = {"key": key, "bytes": len(proto), "sha256": hashlib.sha256(proto).hexdigest()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for target, data in ((path, proto), (_record_of(path), json.dumps(record).encode())):
            partial = target.with_name(f"{target.name}.{os.getpid()}.part")
            partial.write_bytes(data)
            partial.replace(target)
    except OSError as e:
        logger.warning("ONNX decoder cache: cannot write %s (%s); the decoder is exported again on each run until "
                       "%s points at a folder that can be written", path, e.strerror, CACHE_ENV)  # fmt: skip


__all__ = ["CACHE_ENV", "OnnxDecoder", "check_onnx_cache_entry", "default_cache_dir"]
