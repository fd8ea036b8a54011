"""The simulated GPU (asynclab.sim.device): an operator sweep against the CPU, and CUDA's order of streams and memory."""
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from asynclab.sim.device import SimGPU


def _inputs(dev: str) -> SimpleNamespace:
    """Small deterministic tensors, built on the CPU and moved to ``dev``; ``t.dev`` names the device for factories."""
    host = {
        "a": torch.linspace(-2.0, 2.0, 12).reshape(3, 4),  # signed floats
        "b": torch.linspace(0.5, 3.0, 12).reshape(3, 4),  # positive floats
        "c": torch.linspace(-0.9, 0.9, 12).reshape(3, 4),  # inside (-1, 1)
        "p": torch.linspace(0.05, 0.95, 12).reshape(3, 4),  # probabilities
        "i": torch.arange(12).reshape(3, 4) - 5,  # int64
        "j": torch.arange(1, 13, dtype=torch.int32).reshape(3, 4),  # positive int32
        "m": torch.tensor([[True, False, True, False], [False, False, True, True], [True, True, False, False]]),
        "sq": torch.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]]),  # symmetric positive definite
        "v": torch.tensor([1.0, -2.0, 3.0]),
        "w": torch.tensor([0.5, 1.5, -1.0]),
        "bat": torch.arange(24.0).reshape(2, 3, 4) / 10,
        "img": torch.arange(96.0).reshape(2, 3, 4, 4) / 50 - 1,
        "idx": torch.tensor([2, 0, 1]),
        "odd": torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0, -3.5]),
        "labels": torch.tensor([1, 0, 3]),
    }
    moved = {name: t.to(dev) for name, t in host.items()}
    return SimpleNamespace(dev=dev, **moved)


def _set(t: torch.Tensor, index, value) -> torch.Tensor:
    t[index] = value
    return t


def _then(t: torch.Tensor, method: str, *args, **kwargs) -> torch.Tensor:
    """``t`` after an in-place method (the method's own return value dropped)."""
    getattr(t, method)(*args, **kwargs)
    return t


def _clamped_row(x: torch.Tensor) -> torch.Tensor:
    x[0].clamp_(min=0)  # writes through a view into x
    return x


#: (name, op on an input namespace) for deterministic ops: the simulated GPU must give the CPU's values.
POINTWISE = [
    ("abs", lambda t: t.a.abs()), ("neg", lambda t: -t.a), ("exp", lambda t: t.a.exp()),
    ("exp2", lambda t: torch.exp2(t.a)), ("expm1", lambda t: t.a.expm1()), ("log", lambda t: t.b.log()),
    ("log2", lambda t: t.b.log2()), ("log10", lambda t: t.b.log10()), ("log1p", lambda t: t.b.log1p()),
    ("sqrt", lambda t: t.b.sqrt()), ("rsqrt", lambda t: t.b.rsqrt()), ("sin", lambda t: t.a.sin()),
    ("cos", lambda t: t.a.cos()), ("tan", lambda t: t.c.tan()), ("tanh", lambda t: t.a.tanh()),
    ("sigmoid", lambda t: t.a.sigmoid()), ("asin", lambda t: t.c.asin()), ("acos", lambda t: t.c.acos()),
    ("atan", lambda t: t.a.atan()), ("sinh", lambda t: t.a.sinh()), ("cosh", lambda t: t.a.cosh()),
    ("asinh", lambda t: t.a.asinh()), ("atanh", lambda t: t.c.atanh()), ("erf", lambda t: t.a.erf()),
    ("erfc", lambda t: t.a.erfc()), ("erfinv", lambda t: t.c.erfinv()), ("floor", lambda t: (t.a * 1.3).floor()),
    ("ceil", lambda t: (t.a * 1.3).ceil()), ("round", lambda t: (t.a * 1.3).round()),
    ("round decimals", lambda t: (t.a / 3).round(decimals=2)), ("trunc", lambda t: (t.a * 1.3).trunc()),
    ("frac", lambda t: (t.a * 1.3).frac()), ("sign", lambda t: t.a.sign()), ("sgn", lambda t: t.a.sgn()),
    ("signbit", lambda t: t.a.signbit()), ("reciprocal", lambda t: t.b.reciprocal()),
    ("square", lambda t: t.a.square()), ("lgamma", lambda t: t.b.lgamma()), ("digamma", lambda t: t.b.digamma()),
    ("logit", lambda t: t.p.logit()), ("deg2rad", lambda t: t.a.deg2rad()), ("rad2deg", lambda t: t.a.rad2deg()),
    ("pow scalar", lambda t: t.a ** 2), ("rpow", lambda t: 2 ** t.a), ("clamp", lambda t: t.a.clamp(-1, 1)),
    ("clamp min", lambda t: t.a.clamp(min=0)), ("clamp tensors", lambda t: t.a.clamp(t.c, t.b)),
    ("nan_to_num", lambda t: t.odd.nan_to_num()), ("nan_to_num values", lambda t: t.odd.nan_to_num(0.0, 9.0, -9.0)),
    ("isnan", lambda t: t.odd.isnan()), ("isinf", lambda t: t.odd.isinf()), ("isfinite", lambda t: t.odd.isfinite()),
    ("isposinf", lambda t: t.odd.isposinf()), ("add", lambda t: t.a + t.b),
    ("add alpha", lambda t: t.a.add(t.b, alpha=2)), ("add scalar", lambda t: t.a + 1), ("sub", lambda t: t.a - t.b),
    ("rsub", lambda t: 1 - t.a), ("mul", lambda t: t.a * t.b),
    ("mul cpu 0-d tensor", lambda t: t.a * torch.tensor(2.0)), ("div", lambda t: t.a / t.b),
    ("div floor", lambda t: t.a.div(t.b, rounding_mode="floor")), ("floor_divide", lambda t: t.i // 3),
    ("remainder", lambda t: t.i % 3), ("fmod", lambda t: t.a.fmod(0.7)), ("pow tensor", lambda t: t.b.pow(t.c)),
    ("atan2", lambda t: t.a.atan2(t.b)), ("maximum", lambda t: t.a.maximum(t.c)),
    ("minimum", lambda t: t.a.minimum(t.c)), ("fmax", lambda t: t.odd.fmax(torch.zeros_like(t.odd))),
    ("hypot", lambda t: t.a.hypot(t.b)), ("copysign", lambda t: t.b.copysign(t.a)),
    ("lerp", lambda t: t.a.lerp(t.b, 0.25)), ("addcmul", lambda t: t.a.addcmul(t.b, t.c, value=0.5)),
    ("addcdiv", lambda t: t.a.addcdiv(t.c, t.b, value=2)), ("logaddexp", lambda t: t.a.logaddexp(t.c)),
    ("xlogy", lambda t: t.a.xlogy(t.b)), ("bitwise_and", lambda t: t.i & t.j.long()), ("bitwise_or", lambda t: t.i | 3),
    ("bitwise_xor", lambda t: t.i ^ t.j.long()), ("bitwise_not", lambda t: ~t.i), ("shift left", lambda t: t.j << 2),
    ("gcd", lambda t: t.i.gcd(t.j.long())), ("lcm", lambda t: t.j.lcm(t.j + 1)),
    ("where", lambda t: torch.where(t.m, t.a, t.b)), ("where scalar", lambda t: torch.where(t.m, t.a, 0.0)),
    ("masked_fill", lambda t: t.a.masked_fill(t.m, -7.0)), ("relu method", lambda t: t.a.relu()),
    ("heaviside", lambda t: t.a.heaviside(torch.tensor(0.5))),
]

COMPARISONS = [
    ("eq", lambda t: t.a == t.c), ("ne", lambda t: t.a != 0), ("lt", lambda t: t.a < t.c), ("le", lambda t: t.a <= 0),
    ("gt", lambda t: t.a > t.b), ("ge", lambda t: t.i >= 0), ("isclose", lambda t: t.a.isclose(t.c, atol=0.5)),
    ("equal", lambda t: torch.equal(t.a, t.a.clone())), ("allclose", lambda t: torch.allclose(t.a, t.a + 1e-9)),
    ("logical_and", lambda t: t.m & (t.a > -1)), ("logical_or", lambda t: torch.logical_or(t.m, t.a > 1)),
    ("logical_not", lambda t: ~t.m), ("logical_xor", lambda t: torch.logical_xor(t.m, t.a > 0)),
]

REDUCTIONS = [
    ("sum", lambda t: t.a.sum()), ("sum dim", lambda t: t.a.sum(1)),
    ("sum dims keepdim", lambda t: t.bat.sum((0, 2), keepdim=True)), ("sum int", lambda t: t.i.sum()),
    ("mean", lambda t: t.a.mean()), ("mean dim", lambda t: t.a.mean(0, keepdim=True)), ("prod", lambda t: t.b.prod(1)),
    ("max", lambda t: t.a.max()), ("max dim", lambda t: t.a.max(1)), ("min dim", lambda t: t.c.min(0)),
    ("amax", lambda t: t.a.amax(1)), ("amin", lambda t: t.a.amin((0, 1))), ("aminmax", lambda t: torch.aminmax(t.a)),
    ("argmax", lambda t: t.a.argmax()), ("argmin dim", lambda t: t.c.argmin(1)), ("std", lambda t: t.a.std()),
    ("var dim", lambda t: t.a.var(1, correction=0)), ("var_mean", lambda t: torch.var_mean(t.a, 1)),
    ("std_mean", lambda t: torch.std_mean(t.b)), ("norm", lambda t: t.a.norm()),
    ("norm p1 dim", lambda t: t.a.norm(p=1, dim=1)), ("logsumexp", lambda t: t.a.logsumexp(1)),
    ("cumsum", lambda t: t.a.cumsum(1)), ("cumprod", lambda t: t.b.cumprod(0)), ("cummax", lambda t: t.c.cummax(1)),
    ("cummin", lambda t: t.c.cummin(0)), ("all", lambda t: t.m.all()), ("any dim", lambda t: t.m.any(1)),
    ("count_nonzero", lambda t: t.m.count_nonzero()), ("median", lambda t: t.a.median()),
    ("median dim", lambda t: t.a.median(1)), ("mode", lambda t: (t.i % 3).mode(1)),
    ("kthvalue", lambda t: t.c.kthvalue(2, 1)), ("topk", lambda t: t.a.topk(2, dim=1)),
    ("sort", lambda t: t.c.sort(1, descending=True)), ("argsort", lambda t: t.c.argsort(0)),
    ("nansum", lambda t: t.a.masked_fill(t.m, float("nan")).nansum(0)),
    ("nanmean", lambda t: t.a.masked_fill(t.m, float("nan")).nanmean(1)), ("dist", lambda t: t.a.dist(t.c)),
    ("trace", lambda t: t.sq.trace()), ("diff", lambda t: t.a.diff(dim=1)), ("unique", lambda t: (t.i % 4).unique()),
    ("unique counts", lambda t: torch.unique(t.i % 4, return_counts=True)),
    ("bincount", lambda t: (t.i % 4).abs().flatten().bincount()), ("histc", lambda t: t.a.histc(bins=4, min=-2, max=2)),
]

INDEXING = [
    ("int index", lambda t: t.a[1]), ("column", lambda t: t.a[:, 1]), ("slices step", lambda t: t.a[1:, ::2]),
    ("negative index", lambda t: t.a[-1, -2]), ("ellipsis none", lambda t: t.a[..., None]),
    ("tensor index", lambda t: t.a[t.idx]), ("bool mask index", lambda t: t.a[t.m]),
    ("two tensor index", lambda t: t.a[t.idx, t.idx]), ("index tensor then slice", lambda t: t.a[t.idx, :]),
    ("list index", lambda t: t.a[[0, 2]]), ("tensor index mixed with slice", lambda t: t.a[t.idx, 1:]),
    ("tensor index mixed with int", lambda t: t.a[1, t.idx]),
    ("setitem slice", lambda t: _set(t.a.clone(), (slice(None), 0), 9.0)),
    ("setitem tensor", lambda t: _set(t.a.clone(), 1, t.b[0])), ("setitem mask", lambda t: _set(t.a.clone(), t.m, 0.0)),
    ("setitem index tensor", lambda t: _set(t.a.clone(), t.idx, t.b)),
    ("index_select", lambda t: t.a.index_select(1, t.idx)), ("gather", lambda t: t.a.gather(1, t.idx.view(3, 1))),
    ("take", lambda t: t.a.take(t.idx * 3)),
    ("scatter", lambda t: torch.zeros(3, 4, device=t.dev).scatter(1, t.idx.view(3, 1), t.b)),
    ("scatter_add", lambda t: torch.zeros(3, 4, device=t.dev).scatter_add(0, t.idx.view(3, 1).expand(3, 4), t.b)),
    ("scatter_reduce", lambda t: torch.ones(3, device=t.dev).scatter_reduce(0, t.idx, t.v, "amax")),
    ("index_add", lambda t: t.a.index_add(0, t.idx, t.b)), ("index_copy", lambda t: t.a.index_copy(0, t.idx, t.b)),
    ("index_fill", lambda t: t.a.index_fill(1, t.idx, -1.0)), ("index_put", lambda t: t.a.index_put((t.idx,), t.b)),
    ("index_put accumulate", lambda t: t.v.index_put((t.idx[:2] * 0,), t.w[:2], accumulate=True)),
    ("masked_select", lambda t: t.a.masked_select(t.m)), ("masked_scatter", lambda t: t.a.masked_scatter(t.m, t.b)),
    ("nonzero", lambda t: t.m.nonzero()), ("nonzero as_tuple", lambda t: t.m.nonzero(as_tuple=True)),
    ("torch.nonzero as_tuple", lambda t: torch.nonzero(t.m, as_tuple=True)),
    ("where one argument", lambda t: torch.where(t.m)), ("argwhere", lambda t: torch.argwhere(t.a > 0)),
    ("put_", lambda t: _then(t.a.clone(), "put_", t.idx, t.v)), ("narrow", lambda t: t.a.narrow(1, 1, 2)),
    ("select", lambda t: t.a.select(0, 2)), ("unbind", lambda t: t.a.unbind(1)),
    ("split", lambda t: t.a.split(3, dim=1)), ("split sizes", lambda t: t.a.split([1, 3], dim=1)),
    ("chunk", lambda t: t.a.chunk(2, 1)), ("tensor_split", lambda t: t.a.tensor_split(3, dim=1)),
    ("diagonal", lambda t: t.a.diagonal(1)),
    ("masked_fill_ in place", lambda t: _then(t.a.clone(), "masked_fill_", t.m, 3.0)),
    ("fill_ in place", lambda t: _then(t.a.clone(), "fill_", 2.5)),
    ("zero_ in place", lambda t: _then(t.a.clone(), "zero_")),
    ("add_ in place", lambda t: _then(t.a.clone(), "add_", t.b)),
    ("copy_ on device", lambda t: _then(t.a.clone(), "copy_", t.c)),
    ("clamp_ on a view", lambda t: _clamped_row(t.a.clone())),
]


SHAPES = [
    ("t", lambda t: t.a.t()), ("T contiguous", lambda t: t.a.T.contiguous()), ("T clone", lambda t: t.a.T.clone()),
    ("mT", lambda t: t.bat.mT), ("transpose", lambda t: t.bat.transpose(0, 2)),
    ("permute", lambda t: t.bat.permute(2, 0, 1)), ("view", lambda t: t.a.view(4, 3)),
    ("view -1", lambda t: t.bat.view(-1, 4)), ("reshape of transposed", lambda t: t.a.t().reshape(-1)),
    ("flatten", lambda t: t.bat.flatten(1)), ("unflatten", lambda t: t.a.unflatten(1, (2, 2))),
    ("ravel", lambda t: t.a.t().ravel()), ("squeeze", lambda t: t.a[None].squeeze(0)),
    ("unsqueeze", lambda t: t.a.unsqueeze(1)), ("expand", lambda t: t.v.expand(2, 3)),
    ("expand then mul", lambda t: t.v.expand(2, 3) * 1), ("expand_as", lambda t: t.v[:, None].expand_as(t.sq)),
    ("broadcast_to", lambda t: torch.broadcast_to(t.v, (4, 3))), ("repeat", lambda t: t.v.repeat(2, 2)),
    ("tile", lambda t: t.v.tile((2,))), ("repeat_interleave", lambda t: t.v.repeat_interleave(2)),
    ("flip", lambda t: t.a.flip(0, 1)), ("fliplr", lambda t: t.a.fliplr()), ("roll", lambda t: t.a.roll(1, 1)),
    ("rot90", lambda t: t.a.rot90()), ("diag", lambda t: t.v.diag()), ("diag_embed", lambda t: torch.diag_embed(t.v)),
    ("tril", lambda t: t.a.tril()), ("triu", lambda t: t.a.triu(1)), ("movedim", lambda t: t.bat.movedim(0, -1)),
    ("swapaxes", lambda t: t.bat.swapaxes(1, 2)), ("as_strided", lambda t: t.a.as_strided((2, 2), (1, 4), 1)),
    ("unfold", lambda t: t.a.unfold(1, 2, 1)), ("cat", lambda t: torch.cat([t.a, t.b], 1)),
    ("stack", lambda t: torch.stack([t.v, t.w])), ("hstack", lambda t: torch.hstack([t.v, t.w])),
    ("vstack", lambda t: torch.vstack([t.v, t.w])), ("dstack", lambda t: torch.dstack([t.v, t.w])),
    ("column_stack", lambda t: torch.column_stack([t.v, t.w])),
    ("meshgrid", lambda t: torch.meshgrid(t.v, t.w, indexing="ij")),
    ("cartesian_prod", lambda t: torch.cartesian_prod(t.v, t.w)),
    ("block_diag", lambda t: torch.block_diag(t.sq, t.v[None])), ("atleast_2d", lambda t: torch.atleast_2d(t.v)),
    ("clone", lambda t: t.a.clone()), ("detach", lambda t: t.a.detach()),
    ("contiguous of permuted", lambda t: t.bat.permute(1, 0, 2).contiguous()), ("size", lambda t: t.bat.size()),
    ("numel", lambda t: t.bat.numel()), ("dim", lambda t: t.bat.dim()),
]

CREATION = [
    ("zeros", lambda t: torch.zeros(2, 3, device=t.dev)),
    ("ones int", lambda t: torch.ones(4, dtype=torch.int32, device=t.dev)),
    ("full", lambda t: torch.full((2, 2), 7.5, device=t.dev)),
    ("arange", lambda t: torch.arange(2, 11, 3, device=t.dev)),
    ("arange float", lambda t: torch.arange(0, 1, 0.25, device=t.dev)),
    ("linspace", lambda t: torch.linspace(0, 1, 5, device=t.dev)),
    ("logspace", lambda t: torch.logspace(0, 2, 3, device=t.dev)), ("eye", lambda t: torch.eye(3, 2, device=t.dev)),
    ("zeros_like", lambda t: torch.zeros_like(t.a)), ("ones_like", lambda t: torch.ones_like(t.i)),
    ("full_like", lambda t: torch.full_like(t.a, -2.0)),
    ("tensor", lambda t: torch.tensor([[1, 2], [3, 4]], device=t.dev)),
    ("as_tensor", lambda t: torch.as_tensor([1.5, 2.5], device=t.dev)),
    ("tensor of a device", lambda t: torch.tensor([1.0, 2.0], device=t.a.device)),
    ("tril_indices", lambda t: torch.tril_indices(3, 3, device=t.dev)),
    ("triu_indices", lambda t: torch.triu_indices(3, 4, 1, device=t.dev)), ("new_zeros", lambda t: t.a.new_zeros(2)),
    ("new_ones", lambda t: t.i.new_ones((2, 2))), ("new_full", lambda t: t.a.new_full((3,), 4.0)),
    ("new_tensor", lambda t: t.a.new_tensor([1.0, 2.0])),
    ("zeros of a torch.device", lambda t: torch.zeros(2, device=torch.device(t.dev))),
    ("to device and back", lambda t: torch.arange(4.0).to(t.dev) * 2), ("complex", lambda t: torch.complex(t.v, t.w)),
    ("polar abs", lambda t: torch.polar(t.b[0], t.a[0]).abs()),
]

CASTS = [
    ("double", lambda t: t.a.double()), ("half", lambda t: t.a.half()), ("bfloat16", lambda t: t.a.bfloat16()),
    ("int", lambda t: t.a.int()), ("long", lambda t: (t.a * 2).long()), ("bool", lambda t: t.i.bool()),
    ("float of int", lambda t: t.i.float()), ("to float16", lambda t: t.a.to(torch.float16)),
    ("to dtype and device", lambda t: t.i.to(t.dev, torch.float64)), ("type int32", lambda t: t.a.type(torch.int32)),
    ("uint8", lambda t: t.j.to(torch.uint8)), ("view as int32", lambda t: t.a.view(torch.int32)),
    ("type_as", lambda t: t.i.type_as(t.a)), ("to another tensor", lambda t: t.i.to(t.a)),
    ("half arithmetic", lambda t: t.a.half() * t.b.half()),
    ("int true divide", lambda t: t.i / 2), ("bool sum", lambda t: t.m.sum()),
]

LINALG = [
    ("mm", lambda t: t.a.t() @ t.b), ("matmul batched", lambda t: t.bat @ t.bat.mT),
    ("bmm", lambda t: torch.bmm(t.bat, t.bat.mT)), ("mv", lambda t: t.sq.mv(t.v)), ("dot", lambda t: t.v.dot(t.w)),
    ("vdot", lambda t: torch.vdot(t.v, t.w)), ("outer", lambda t: t.v.outer(t.w)),
    ("addmm", lambda t: torch.addmm(t.sq, t.sq, t.sq, beta=0.5)), ("addmv", lambda t: torch.addmv(t.v, t.sq, t.w)),
    ("addr", lambda t: torch.addr(t.sq, t.v, t.w)),
    ("baddbmm", lambda t: torch.baddbmm(t.bat @ t.bat.mT, t.bat, t.bat.mT, alpha=2)),
    ("einsum", lambda t: torch.einsum("bij,bkj->bik", t.bat, t.bat)),
    ("tensordot", lambda t: torch.tensordot(t.a, t.b, dims=([1], [1]))),
    ("kron", lambda t: torch.kron(t.sq, t.sq[:2, :2])), ("cross", lambda t: torch.linalg.cross(t.v, t.w)),
    ("cdist", lambda t: torch.cdist(t.a, t.b)), ("det", lambda t: torch.linalg.det(t.sq)),
    ("slogdet", lambda t: torch.linalg.slogdet(t.sq)), ("inv", lambda t: torch.linalg.inv(t.sq)),
    ("solve", lambda t: torch.linalg.solve(t.sq, t.v)), ("cholesky", lambda t: torch.linalg.cholesky(t.sq)),
    ("cholesky_solve", lambda t: torch.cholesky_solve(t.v[:, None], torch.linalg.cholesky(t.sq))),
    ("solve_triangular", lambda t: torch.linalg.solve_triangular(t.sq.triu(), t.v[:, None], upper=True)),
    ("qr", lambda t: torch.linalg.qr(t.sq)), ("eigh", lambda t: torch.linalg.eigh(t.sq)),
    ("eigvalsh", lambda t: torch.linalg.eigvalsh(t.sq)), ("svd", lambda t: torch.linalg.svd(t.sq)),
    ("svdvals", lambda t: torch.linalg.svdvals(t.a)), ("pinv", lambda t: torch.linalg.pinv(t.a)),
    ("lstsq", lambda t: torch.linalg.lstsq(t.sq, t.v[:, None]).solution),
    ("matrix_power", lambda t: torch.linalg.matrix_power(t.sq, 3)),
    ("matrix_exp", lambda t: torch.linalg.matrix_exp(t.sq / 4)),
    ("vector_norm", lambda t: torch.linalg.vector_norm(t.a, ord=3, dim=1)),
    ("matrix_norm", lambda t: torch.linalg.matrix_norm(t.sq, ord="fro")),
    ("linalg norm 2", lambda t: torch.linalg.norm(t.sq, 2)), ("lu_factor", lambda t: torch.linalg.lu_factor(t.sq)),
]

FUNCTIONAL = [
    ("relu", lambda t: F.relu(t.a)), ("gelu", lambda t: F.gelu(t.a)),
    ("gelu tanh", lambda t: F.gelu(t.a, approximate="tanh")), ("silu", lambda t: F.silu(t.a)),
    ("mish", lambda t: F.mish(t.a)), ("elu", lambda t: F.elu(t.a)), ("selu", lambda t: F.selu(t.a)),
    ("leaky_relu", lambda t: F.leaky_relu(t.a, 0.1)), ("hardtanh", lambda t: F.hardtanh(t.a)),
    ("hardswish", lambda t: F.hardswish(t.a)), ("softplus", lambda t: F.softplus(t.a)),
    ("logsigmoid", lambda t: F.logsigmoid(t.a)), ("threshold", lambda t: F.threshold(t.a, 0.5, -1.0)),
    ("glu", lambda t: F.glu(t.a, dim=1)), ("softmax", lambda t: F.softmax(t.a, dim=1)),
    ("log_softmax", lambda t: F.log_softmax(t.a, dim=0)), ("softmin", lambda t: F.softmin(t.a, dim=1)),
    ("normalize", lambda t: F.normalize(t.a, dim=1)), ("linear", lambda t: F.linear(t.a, t.b, t.v)),
    ("linear no bias", lambda t: F.linear(t.b, t.a)), ("conv1d", lambda t: F.conv1d(t.bat, t.bat[:, :, :2], padding=1)),
    ("conv2d", lambda t: F.conv2d(t.img, t.img[:2, :, :2, :2], padding=1)),
    ("conv_transpose2d", lambda t: F.conv_transpose2d(t.img, t.img[0, :, :2, :2].unsqueeze(1))),
    ("max_pool2d", lambda t: F.max_pool2d(t.img, 2)), ("avg_pool2d", lambda t: F.avg_pool2d(t.img, 2, stride=1)),
    ("adaptive_avg_pool2d", lambda t: F.adaptive_avg_pool2d(t.img, 1)),
    ("max_pool1d", lambda t: F.max_pool1d(t.bat, 2)), ("layer_norm", lambda t: F.layer_norm(t.a, (4,))),
    ("group_norm", lambda t: F.group_norm(t.img, 1)),
    ("batch_norm eval", lambda t: F.batch_norm(t.img, t.v, t.b[0, :3], training=False)),
    ("batch_norm training", lambda t: F.batch_norm(t.img, None, None, training=True)),
    ("instance_norm", lambda t: F.instance_norm(t.img)), *([("rms_norm", lambda t: F.rms_norm(t.a, (4,)))] if hasattr(F, "rms_norm") else []),
    ("pad", lambda t: F.pad(t.a, (1, 2))), ("pad reflect", lambda t: F.pad(t.img, (1, 1, 1, 1), mode="reflect")),
    ("interpolate nearest", lambda t: F.interpolate(t.img, scale_factor=2)),
    ("interpolate bilinear", lambda t: F.interpolate(t.img, size=(3, 5), mode="bilinear", align_corners=False)),
    ("mse_loss", lambda t: F.mse_loss(t.a, t.b)), ("l1_loss", lambda t: F.l1_loss(t.a, t.b)),
    ("smooth_l1_loss", lambda t: F.smooth_l1_loss(t.a, t.c)), ("huber_loss", lambda t: F.huber_loss(t.a, t.b)),
    ("cross_entropy", lambda t: F.cross_entropy(t.a, t.labels)),
    ("cross_entropy smoothing", lambda t: F.cross_entropy(t.a, t.labels, label_smoothing=0.1)),
    ("nll_loss", lambda t: F.nll_loss(F.log_softmax(t.a, 1), t.labels)),
    ("binary_cross_entropy", lambda t: F.binary_cross_entropy(t.p, t.p.flip(0))),
    ("bce_with_logits", lambda t: F.binary_cross_entropy_with_logits(t.a, t.p)),
    ("kl_div", lambda t: F.kl_div(t.a.log_softmax(1), t.p, reduction="batchmean")),
    ("cosine_similarity", lambda t: F.cosine_similarity(t.a, t.b)),
    ("pairwise_distance", lambda t: F.pairwise_distance(t.a, t.c)), ("one_hot", lambda t: F.one_hot(t.labels, 4)),
    ("embedding", lambda t: F.embedding(t.idx, t.a)), ("unfold im2col", lambda t: F.unfold(t.img, 2)),
    ("pixel_shuffle", lambda t: F.pixel_shuffle(t.img.repeat(1, 4, 1, 1), 2)),
    ("dropout eval", lambda t: F.dropout(t.a, 0.5, training=False)),
    ("scaled_dot_product_attention", lambda t: F.scaled_dot_product_attention(t.bat, t.bat, t.bat)),
    ("nn.Linear under no_grad", lambda t: _linear_module(t)),
]


def _linear_module(t: SimpleNamespace) -> torch.Tensor:
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 2).to(t.dev)
    with torch.no_grad():
        return layer(t.a)


HOST_READS = [
    ("item", lambda t: t.a.sum().item()), ("tolist", lambda t: t.a.tolist()), ("float()", lambda t: float(t.a.max())),
    ("int()", lambda t: int(t.i.sum())), ("bool()", lambda t: bool(t.m.any())),
    ("index()", lambda t: list(range(10))[t.idx[0]]), ("cpu", lambda t: t.a.cpu() + 1),
    ("to cpu", lambda t: t.i.to("cpu")), ("iterate rows", lambda t: [row.sum().item() for row in t.a]),
    ("format", lambda t: f"{t.a.sum():.3f}"), ("len", lambda t: len(t.a)), ("shape", lambda t: t.bat.shape),
]

_DRIVER = "calls the real CUDA driver on a machine without one: "

#: Known limits of the simulated GPU: composite operators whose C++ asks the real CUDA driver something before any
#: operator reaches the simulation (the test must fail: strict xfail). Their verdict names the call as the
#: simulation's limit.
XFAIL: dict[str, str] = {
    "batch_norm eval": "torch.batch_norm asks if cuDNN applies: " + _DRIVER + "RuntimeError 'Found no NVIDIA driver'",
    "batch_norm training": "torch.batch_norm " + _DRIVER + "RuntimeError 'Found no NVIDIA driver'",
    "instance_norm": "torch.instance_norm (through batch_norm) " + _DRIVER + "RuntimeError 'Found no NVIDIA driver'",
    "cosine_similarity": "torch.cosine_similarity " + _DRIVER + "RuntimeError 'Found no NVIDIA driver'",
    "one_hot": "F.one_hot " + _DRIVER + "RuntimeError 'Found no NVIDIA driver'",
}

_REAL = "on a machine with a GPU makes a tensor inside its C++ on the real GPU, which the simulation does not see: "
#: The same limit where the driver is there (the GPU check, where lesson 06 runs on two simulated GPUs): composite
#: operators whose C++ makes a tensor with the GPU tensor's device, which is then the real GPU's.
XFAIL_WITH_A_GPU: dict[str, str] = {
    "batch_norm eval": "torch.batch_norm in eval mode " + _REAL + "a wrong size",
    "cosine_similarity": "torch.cosine_similarity " + _REAL + "its epsilon, on cuda:0",
    "one_hot": "F.one_hot " + _REAL + "its zeros, on cuda:0",
}

GPU_OPS = [op for group in (POINTWISE, COMPARISONS, REDUCTIONS, INDEXING, SHAPES, CREATION, CASTS, LINALG, FUNCTIONAL)
           for op in group]
ALL_OPS = GPU_OPS + HOST_READS


#: Of those, the ones that PyTorch 2.3 (the oldest the course supports) runs on the simulated GPU as on a GPU, and
#: those that ask the driver there only.
WORK_ON_OLDEST = {"cosine_similarity"}
FAIL_ON_OLDEST_ONLY = {"scaled_dot_product_attention": "F.scaled_dot_product_attention on PyTorch 2.3 " + _DRIVER
                       + "RuntimeError 'CUDA driver version is insufficient'"}
OLDEST = torch.__version__.startswith("2.3")


def _params(ops, xfail=None):
    if xfail is None and torch.cuda.is_available():  # the GPU check: the driver they ask is there
        xfail = XFAIL_WITH_A_GPU
    xfail = dict(XFAIL, **(FAIL_ON_OLDEST_ONLY if OLDEST else {})) if xfail is None else xfail
    marks = {name: [pytest.mark.xfail(strict=True, reason=why)]
             for name, why in xfail.items() if not (OLDEST and name in WORK_ON_OLDEST)}
    return [pytest.param(op, id=name, marks=marks.get(name, [])) for name, op in ops]


def _host(value):
    """A result with every tensor on the host (GPU tensors copied back with .cpu())."""
    if isinstance(value, torch.Tensor):
        return value.cpu() if value.device.type == "cuda" else value
    if isinstance(value, tuple):
        return tuple(_host(v) for v in value)
    if isinstance(value, list):
        return [_host(v) for v in value]
    return value


def _devices(value) -> set:
    if isinstance(value, torch.Tensor):
        return {value.device.type}
    if isinstance(value, (tuple, list)):
        return set().union(*(_devices(v) for v in value)) if value else set()
    return set()


def test_the_sweep_has_enough_distinct_ops():
    names = [name for name, _ in ALL_OPS]
    assert len(names) == len(set(names)), "op names must be distinct"
    assert len(names) >= 150


def _same(got, expected) -> None:
    if isinstance(expected, (torch.Tensor, tuple, list)) and _devices(expected):
        torch.testing.assert_close(got, expected, equal_nan=True)
    else:
        assert got == expected


@pytest.mark.parametrize("op", _params(GPU_OPS))
def test_op_matches_the_cpu(op):
    expected = op(_inputs("cpu"))
    with SimGPU():
        result = op(_inputs("cuda"))
        devices = _devices(result)
        got = _host(result)
    if _devices(expected):
        assert devices == {"cuda"}, f"a GPU op gave tensors on {devices}"
    _same(got, expected)


@pytest.mark.parametrize("op", _params(HOST_READS))
def test_host_read_matches_the_cpu(op):
    expected = op(_inputs("cpu"))
    with SimGPU():
        got = op(_inputs("cuda"))
    assert _devices(got) <= {"cpu"}
    _same(got, expected)


#: Ops whose values are random or undefined: the simulated GPU must give the shape, dtype and device.
RANDOM = [
    ("rand", lambda t: torch.rand(3, 4, device=t.dev)),
    ("randn", lambda t: torch.randn(5, device=t.dev, dtype=torch.float64)),
    ("randint", lambda t: torch.randint(0, 10, (2, 3), device=t.dev)),
    ("randperm", lambda t: torch.randperm(6, device=t.dev)), ("rand_like", lambda t: torch.rand_like(t.a)),
    ("randn_like", lambda t: torch.randn_like(t.bat)), ("randint_like", lambda t: torch.randint_like(t.i, 5)),
    ("bernoulli", lambda t: torch.bernoulli(t.p)), ("multinomial", lambda t: torch.multinomial(t.p, 2)),
    ("normal_", lambda t: torch.empty(4, device=t.dev).normal_()), ("uniform_", lambda t: t.a.clone().uniform_(-1, 1)),
    ("exponential_", lambda t: t.a.clone().exponential_()), ("dropout", lambda t: F.dropout(t.a, 0.5)),
    ("dropout2d", lambda t: F.dropout2d(t.img, 0.5)), ("empty", lambda t: torch.empty(2, 5, device=t.dev)),
    ("empty_like", lambda t: torch.empty_like(t.i)),
    ("empty_strided", lambda t: torch.empty_strided((2, 3), (1, 2), device=t.dev)),
]


@pytest.mark.parametrize("op", _params(RANDOM))
def test_random_op_has_the_cpu_shape_and_dtype(op):
    expected = op(_inputs("cpu"))
    with SimGPU():
        got = op(_inputs("cuda"))
        assert (got.shape, got.dtype, got.device.type) == (expected.shape, expected.dtype, "cuda")
        got.cpu()  # its values can be read


def _race(wait: bool) -> list:
    with SimGPU() as gpu:
        x = torch.zeros(4, device="cuda")
        side = torch.cuda.Stream()
        torch.cuda._sleep(gpu.cycles(50))  # the default stream is busy for 50 ms...
        x.fill_(1.0)  # ...before it writes x
        if wait:
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x * 2
        torch.cuda.current_stream().wait_stream(side)  # the read below, on the default stream, comes after y
        return y.cpu().tolist()


def test_a_side_stream_that_does_not_wait_reads_the_old_values():
    assert _race(wait=False) == [0.0] * 4


def test_a_side_stream_that_waits_reads_the_new_values():
    assert _race(wait=True) == [2.0] * 4


def test_a_host_read_waits_for_its_copy_on_the_current_stream():
    with SimGPU() as gpu:
        x = torch.zeros(4, device="cuda")
        torch.cuda._sleep(gpu.cycles(50))
        x.fill_(1.0)
        assert x.tolist() == [1.0] * 4 and x.sum().item() == 4.0 and gpu.host >= 50.0


def _reuse(record: bool) -> list:
    with SimGPU() as gpu:
        default, side = torch.cuda.current_stream(), torch.cuda.Stream()
        with torch.cuda.stream(side):
            y = torch.full((1024,), 2.0, device="cuda")  # made on the side stream
        default.wait_stream(side)
        if record:
            y.record_stream(default)
        torch.cuda._sleep(gpu.cycles(50))  # the default stream is busy before it reads y
        seen = y * 1
        del y  # freed while the default stream has yet to read it
        with torch.cuda.stream(side):
            torch.empty(1024, device="cuda").fill_(-1.0)  # the side stream's next block of that size
        return seen.cpu().tolist()


def test_without_record_stream_a_freed_block_is_reused_before_the_late_read():
    assert _reuse(record=False) == [-1.0] * 1024


def test_record_stream_keeps_the_block_for_the_late_read():
    assert _reuse(record=True) == [2.0] * 1024


def test_a_non_blocking_copy_to_pinned_memory_lands_when_it_ends():
    with SimGPU() as gpu:
        x = torch.zeros(4, device="cuda")
        host = torch.zeros(4).pin_memory()
        torch.cuda._sleep(gpu.cycles(50))
        x.fill_(3.0)
        host.copy_(x, non_blocking=True)
        assert host.is_pinned()
        assert host.tolist() == [0.0] * 4  # read before the copy ends: the old values
        torch.cuda.synchronize()
        assert host.tolist() == [3.0] * 4


def test_a_non_blocking_to_cpu_is_not_written_before_a_wait():
    with SimGPU() as gpu:
        x = torch.zeros(4, device="cuda")
        torch.cuda._sleep(gpu.cycles(50))
        x.fill_(3.0)
        host = x.to("cpu", non_blocking=True)
        early = host.tolist()
        torch.cuda.current_stream().synchronize()
        assert early != [3.0] * 4 and host.tolist() == [3.0] * 4


def _read_while_a_copy_overwrites(copy_after_ms: float) -> list[float]:
    """``y = x * 2`` on the default stream (about 2.7 ms, as slow as a GPU's 8 GB) while a side stream copies new
    values into ``x`` from ``copy_after_ms`` on (about 76 ms): what ``y`` holds in the end."""
    with SimGPU(scale=1e6) as gpu:
        x, side = torch.ones(1 << 10, device="cuda"), torch.cuda.Stream()
        host = torch.full((1 << 10,), 5.0).pin_memory()
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(gpu.cycles(copy_after_ms))
            x.copy_(host, non_blocking=True)
        y = x * 2
        torch.cuda.synchronize()
        return y.tolist()


def test_a_copy_that_starts_while_a_kernel_reads_its_memory_spoils_what_the_kernel_writes():
    spoiled = _read_while_a_copy_overwrites(1.0)  # the copy ends long after the kernel: it had begun to write
    assert all(math.isnan(v) for v in spoiled)
    assert _read_while_a_copy_overwrites(10.0) == [2.0] * 1024  # the copy starts after the kernel ended: no race


def test_print_and_repr_show_the_device(capsys):
    with SimGPU():
        x = torch.arange(3.0, device="cuda")
        print(x)
        text = repr(x * 2)
    assert capsys.readouterr().out.strip() == "tensor([0., 1., 2.], device='cuda:0')"
    assert text == "tensor([0., 2., 4.], device='cuda:0')"


def test_numpy_of_a_cuda_tensor_raises_as_pytorch_does():
    with SimGPU():
        x = torch.ones(2, device="cuda")
        with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
            x.numpy()


def test_the_trace_has_the_kernels_and_their_streams():
    with SimGPU() as gpu:
        x = torch.ones(8, device="cuda")
        side = torch.cuda.Stream()
        torch.cuda._sleep(gpu.cycles(5))
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x * 2
        z = x + 1
        trace = gpu.trace()
    ev = trace.events[trace.events["stream"].notna()]
    rows = list(zip(ev["name"], ev["stream"].astype(int)))
    assert rows == [("ones", 7), ("spin", 7), ("mul", 13), ("add", 7)]
    assert (ev["device"] == 0).all()
    host = trace.events[trace.events["kind"] == "launch"]  # each launched from the host, in order, linked
    assert len(host) == 4 and ev["launch"].tolist() == host.index.tolist()
    mul, spin = ev[ev["name"] == "mul"].iloc[0], ev[ev["name"] == "spin"].iloc[0]
    assert mul["start_us"] >= spin["end_us"]  # the side stream waited for the spin
    del y, z


#: Ops that queue GPU work and return at once on CUDA: the host must not wait for a busy stream.
ASYNC_OPS = [
    ("mul", lambda x: x * 2), ("double", lambda x: x.double()), ("to dtype", lambda x: x.to(torch.float64)),
    ("to same cuda device and dtype", lambda x: x.to("cuda", torch.float64)),
    ("to device= and dtype=", lambda x: x.to(device=x.device, dtype=torch.float64)), ("clone", lambda x: x.clone()),
    ("sum", lambda x: x.sum()), ("zeros_like", lambda x: torch.zeros_like(x)),
    ("arange on x.device", lambda x: torch.arange(4, device=x.device)),
    ("index with a GPU tensor", lambda x: x[x.long()]), ("where", lambda x: torch.where(x > 0, x, 0)),
    ("softmax", lambda x: F.softmax(x, 0)), ("matmul", lambda x: x @ x), ("cat", lambda x: torch.cat([x, x])),
    ("expand then mul", lambda x: x.expand(2, 4) * 1),
    ("transposed contiguous", lambda x: x.view(2, 2).t().contiguous()), ("in-place add_", lambda x: x.add_(1)),
    ("record_stream", lambda x: x.record_stream(torch.cuda.current_stream())),
]
ASYNC_XFAIL: dict[str, str] = {}

#: Reads that CUDA makes the host wait for (the data decides the result, or the host gets the values).
SYNC_OPS = [
    ("item", lambda x: x.sum().item()), ("tolist", lambda x: x.tolist()), ("cpu", lambda x: x.cpu()),
    ("bool", lambda x: bool(x.any())), ("nonzero", lambda x: x.nonzero()), ("masked_select", lambda x: x[x > 0]),
    ("print", lambda x: repr(x)), ("torch.tensor to the GPU", lambda x: torch.tensor([1.0], device="cuda")),
]


def _host_wait(op) -> float:
    with SimGPU() as gpu:
        x = torch.zeros(4, device="cuda")
        torch.cuda._sleep(gpu.cycles(50))  # the current stream is busy for 50 ms
        x.fill_(3.0)
        before = gpu.host
        op(x)
        return gpu.host - before


@pytest.mark.parametrize("op", _params(ASYNC_OPS, ASYNC_XFAIL))
def test_an_async_op_does_not_make_the_host_wait(op):
    assert _host_wait(op) < 1.0


@pytest.mark.parametrize("op", _params(SYNC_OPS, {}))
def test_a_read_makes_the_host_wait_for_the_stream(op):
    assert _host_wait(op) > 40.0  # it waited for the spin


def test_a_copy_into_one_element_of_a_host_tensor_is_a_copy_from_the_gpu():
    with SimGPU():
        loss = torch.arange(4.0, device="cuda") * 2
        out, host = torch.zeros(4), torch.zeros(4)
        for i in range(4):
            out[i].copy_(loss[i])  # a 0-d host destination
            host[i] = loss[i]
        assert out.tolist() == host.tolist() == [0.0, 2.0, 4.0, 6.0]


def _gpu_rows(gpu: SimGPU):
    ev = gpu.trace().events
    return ev[ev["device"].notna() & (ev["kind"] != "sync")][["kind", "name", "dur_us"]]


def test_a_copy_within_one_gpu_of_one_dtype_and_layout_is_a_memcpy_and_any_other_a_kernel():
    n = 1 << 24  # 64 MiB of float32
    with SimGPU() as gpu:
        a = torch.ones(n, device="cuda")
        b = torch.empty_like(a)
        b.copy_(a)  # as PyTorch does it (aten/src/ATen/native/cuda/Copy.cu): cudaMemcpyAsync, device to device
        c = a.clone()
        a.view(4096, 4096).t().contiguous()  # another layout: a copy kernel
        a.half()  # another dtype: a kernel
        assert torch.equal(b, c) and c.sum().item() == n
        rows = _gpu_rows(gpu)
    copies = rows[rows["kind"] == "d2d"]
    assert copies["name"].tolist() == ["Memcpy DtoD (Device -> Device)"] * 2
    # the card's time per copy within the GPU, and the bytes read and written at the memory's bandwidth
    expected_us = gpu.D2D_LATENCY_MS * 1e3 + 2 * n * 4 / gpu.MEMORY_BYTES_PER_MS * 1e3
    assert copies["dur_us"].tolist() == pytest.approx([expected_us] * 2)
    assert {"clone", "_to_copy"} <= set(rows.loc[rows["kind"] == "compute", "name"])


def test_a_tensor_that_is_only_allocated_runs_no_kernel_and_a_filled_one_writes_its_bytes():
    n = 1 << 26  # 256 MiB of float32
    with SimGPU() as gpu:
        x = torch.empty(n, device="cuda")
        torch.empty_like(x), x.new_empty(8), torch.empty(4, 4, device="cuda").new_empty_strided((2,), (1,))
        torch.zeros(n, device="cuda")
        rows = _gpu_rows(gpu)
    assert rows["name"].tolist() == ["zeros"]
    assert rows["dur_us"].iloc[0] == pytest.approx(n * 4 / gpu.MEMORY_BYTES_PER_MS * 1e3)


def test_a_block_reused_from_the_front_of_its_pool_is_not_reserved_again():
    """A freed block the allocator finds first in its pool (position 0) is reused: reserved memory stays as it was."""
    with SimGPU():
        x = torch.empty(1000, device="cuda")
        reserved = torch.cuda.memory_reserved()
        del x
        y = torch.empty(1000, device="cuda")
        assert (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()) == (4096, reserved) == (4096, 4096)
        assert torch.cuda.max_memory_reserved() == 4096
        del y
