"""How the simulated GPU runs one operator: the first of its rules (:data:`OPERATOR_RULES`) that matches it, in order a
rule of the operator's own, the device check, a view, a read by the host, or a kernel on the current stream (how long
a kernel runs: :mod:`asynclab.sim.kernel_costs`).

Every function here takes the running :class:`asynclab.sim.device.SimGPU` as ``gpu``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, NamedTuple

import torch

from asynclab.sim.kernel_costs import CUBLAS_PRODUCTS, kernel_cost, memcpy_bytes, product_rounds
from asynclab.sim.nest import leaves, map_leaves
from asynclab.sim.running import RUNNING
from asynclab.sim.simulation import Simulation
from asynclab.sim.tensors import DeviceTensor, PinnedTensor, fresh_memory, needed_bytes, shaped_on

aten = torch.ops.aten


class _NeedsHostRead(Exception):
    """The operator's output shape or value depends on the data: the host must read it (as nonzero does on a GPU)."""


def _devices(args: Any) -> set[int]:
    return {t.block.device for t in leaves(args) if isinstance(t, DeviceTensor)}


def _host_tensors(args: Any) -> list[torch.Tensor]:
    """Host tensors among an operator's arguments, other than 0-d ones (which PyTorch lets a GPU kernel read)."""
    return [t for t in leaves(args)
            if isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor) and t.dim() > 0]


def _any_host(tensors: Any) -> bool:
    """Whether a host tensor of any shape is among these: a copy to or from one is a host-GPU copy, a 0-d one
    (``out[i].copy_(loss)``, ``host[i] = t``) too."""
    return any(isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor) for t in leaves(tensors))


def _meta(x: Any) -> Any:
    if isinstance(x, DeviceTensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.Tensor):
        return x.to("meta")
    if isinstance(x, torch.device) and x.type == "cuda":
        return torch.device("meta")
    return x


def _elem(x: Any) -> Any:
    return x.elem if isinstance(x, DeviceTensor) else x


def _on_cpu(x: Any) -> Any:
    """An operator's argument as its CPU run takes it: a GPU tensor's memory, a GPU device as the CPU."""
    if isinstance(x, torch.device) and x.type == "cuda":
        return torch.device("cpu")
    return _elem(x)


def _garbage(x: Any) -> Any:
    """An operator's argument as a run that computes no values reads it: a GPU tensor as never-written memory (every
    byte 0xFF), whatever its memory holds.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     _garbage(torch.ones(2, device="cuda")).tolist(), _garbage(3)
        ([nan, nan], 3)
    """
    if isinstance(x, DeviceTensor):
        return shaped_on(fresh_memory(needed_bytes(x)), x)
    return _on_cpu(x)


def _raw(x: Any) -> Any:
    """A host tensor as a plain tensor: writing into it must not bring the simulation up to date (it is doing that)."""
    if type(x) is PinnedTensor:
        with torch._C.DisableTorchFunctionSubclass():
            return x.as_subclass(torch.Tensor)
    return _elem(x)


class SchemaFacts(NamedTuple):
    """What an operator's schema says, worked out once per operator (:func:`schema_facts`): its name without its
    namespace, whether it is a view, whether it returns a view of an input, and its arguments that it writes in
    place (``Tensor(a!)``), as (position, keyword only, name)."""
    name: str
    is_view: bool
    returns_view: bool
    written: tuple


def schema_facts(func: Any) -> SchemaFacts:
    """:class:`SchemaFacts` of the operator ``func``: read from its schema on its first call, then kept (a schema
    never changes, and a training loop calls the same operators again and again).

    Example:
        >>> [schema_facts(op)[:3] for op in (aten.mm.default, aten.t.default, aten.add_.Tensor)]
        [('mm', False, False), ('t', True, True), ('add_', False, False)]
        >>> schema_facts(aten.add_.Tensor).written
        ((0, False, 'self'),)
    """
    facts = RUNNING.schemas.get(func)
    if facts is None:
        schema = func._schema
        returns, arguments = schema.returns, schema.arguments
        writes = lambda a: a.alias_info is not None and a.alias_info.is_write  # noqa: E731
        views = [r for r in returns if r.alias_info is not None and not r.alias_info.is_write]
        facts = SchemaFacts(schema.name.split("::")[-1],
                            bool(returns) and len(views) == len(returns) and not any(writes(a) for a in arguments),
                            bool(views),
                            tuple((i, a.kwarg_only, a.name) for i, a in enumerate(arguments) if writes(a)))
        RUNNING.schemas[func] = facts
    return facts


def _mutated(written: tuple, args: tuple, kwargs: dict, kind: type = DeviceTensor) -> list:
    """The tensors (of type ``kind``) the operator writes in place, from its schema's ``written`` arguments
    (``Tensor(a!)``, :attr:`SchemaFacts.written`), in order."""
    out = []
    for i, kwarg_only, name in written:
        value = args[i] if i < len(args) and not kwarg_only else kwargs.get(name)
        out += [t for t in leaves(value) if isinstance(t, kind)]
    return out


_UNKNOWN = object()  # what OperatorCall has not worked out yet


class OperatorCall:
    """One call of an operator as the rules see it: the operator, its arguments, and what the rules work out about
    them, each once: what its schema says (``facts``, :func:`schema_facts`), the leaves of its arguments (``flat``,
    :func:`asynclab.sim.nest.leaves`, or those the caller already has), the GPUs its tensors are on (``devices``),
    and on first use its outputs' shapes.

    Example:
        >>> call = OperatorCall(aten.mm.default, (torch.empty(2, 3), torch.empty(3, 4)), {})
        >>> call.name, call.devices, call.shapes.shape, call.shapes.device
        ('mm', set(), torch.Size([2, 4]), device(type='meta'))
        >>> OperatorCall(aten.nonzero.default, (torch.ones(3),), {}).shapes is READ_BY_HOST
        True
    """

    __slots__ = ("func", "args", "kwargs", "facts", "flat", "devices", "_outputs")

    def __init__(self, func: Any, args: tuple, kwargs: dict, flat: list | None = None) -> None:
        self.func, self.args, self.kwargs = func, args, kwargs
        self.facts = schema_facts(func)
        self.flat = leaves((args, kwargs)) if flat is None else flat
        self.devices = {t.block.device for t in self.flat if isinstance(t, DeviceTensor)}
        self._outputs: Any = _UNKNOWN  # the shapes, once worked out

    @property
    def name(self) -> str:
        """The operator's name without its namespace (``mm`` for ``aten::mm``)."""
        return self.facts.name

    def device(self, gpu: Simulation) -> int:
        """The GPU the operator runs on: its tensors' (one, once the device check has passed), else ``gpu``'s current
        one."""
        return next(iter(self.devices)) if self.devices else gpu.device

    @property
    def shapes(self) -> Any:
        """The operator's outputs as meta tensors (:func:`_shapes`), or :data:`READ_BY_HOST` where the host must read
        them: an output whose size or value depends on the data (``nonzero``, ``.item()``), or none at all; worked out
        on first use."""
        if self._outputs is _UNKNOWN:
            self._outputs = _outputs_of(self.func, self.args, self.kwargs)
        return self._outputs


def _outputs_of(func: Any, args: tuple, kwargs: dict) -> Any:
    """:attr:`OperatorCall.shapes` of ``func`` called on ``args`` and ``kwargs``."""
    try:
        shapes = _shapes(func, args, kwargs)
        written = schema_facts(func).written
        in_place = not func._schema.returns and bool(_mutated(written, args, kwargs))  # torch._foreach_add_(xs, ys)
        outs = leaves(shapes)
        if not all(isinstance(o, torch.Tensor) for o in outs) or not (outs or in_place):
            raise _NeedsHostRead()
    except (_NeedsHostRead, NotImplementedError, RuntimeError) as err:
        meta = isinstance(err, (_NeedsHostRead, NotImplementedError)) or "meta" in str(err).lower() \
            or "data-dependent" in str(err)
        if not meta:
            raise
        return READ_BY_HOST
    return shapes


#: What :attr:`OperatorCall.shapes` is for an operator whose outputs the host must read.
READ_BY_HOST = object()


class OperatorRule(NamedTuple):
    """One entry of :data:`OPERATOR_RULES`: the operators it is for (none: those its ``predicate`` picks), and the
    ``rule(gpu, call)`` that runs them."""
    ops: frozenset
    predicate: Callable[[OperatorCall], bool] | None
    rule: Callable[[Simulation, OperatorCall], Any]

    def matches(self, call: OperatorCall) -> bool:
        """Whether this entry is for ``call``'s operator.

        Example:
            >>> entry = OperatorRule(frozenset({aten.mm.default}), None, print)
            >>> [entry.matches(OperatorCall(op, (), {})) for op in (aten.mm.default, aten.add.Tensor)]
            [True, False]
        """
        return call.func in self.ops if self.predicate is None else self.predicate(call)


#: The simulated operator rules, in the order :func:`run_operator` tries them (filled by :func:`operator_rule`, as
#: PyTorch's FakeTensor fills its ``op_implementations``): those for named operators first, then those keyed by a
#: predicate, each in the order registered. The predicates' rules are the general path: the device check, a view,
#: a read by the host, and a kernel, the last taking any operator. A rule hands the operator on to the next one that
#: matches by returning :data:`NEXT`.
OPERATOR_RULES: list[OperatorRule] = []
NEXT = object()


def operator_rule(*keys: Any) -> Callable:
    """Register the decorated ``rule(gpu, call)`` (``call`` an :class:`OperatorCall`) for the operators ``keys``, or
    for those a predicate ``keys[0](call)`` picks; a second rule for one operator is refused.

    Example:
        >>> operator_rule(aten.is_pinned.default)(lambda gpu, call: True)
        Traceback (most recent call last):
        ...
        ValueError: a second simulated rule for aten.is_pinned.default
        >>> [e.rule.__name__ for e in OPERATOR_RULES if e.predicate is not None]
        ['_two_devices', '_view', '_read_by_host', '_kernel']
    """
    predicate = keys[0] if len(keys) == 1 and inspect.isfunction(keys[0]) else None
    ops = frozenset() if predicate is not None else frozenset(keys)

    def register(rule: Callable) -> Callable:
        again = [op for op in keys if predicate is None and any(op in e.ops for e in OPERATOR_RULES)]
        if again:
            raise ValueError(f"a second simulated rule for {again[0]}")
        general = next((i for i, e in enumerate(OPERATOR_RULES) if e.predicate is not None), len(OPERATOR_RULES))
        OPERATOR_RULES.insert(len(OPERATOR_RULES) if predicate is not None else general,
                              OperatorRule(ops, predicate, rule))
        return rule
    return register


def _rules_for(func: Any) -> tuple:
    """The entries of :data:`OPERATOR_RULES` that may run ``func``, in their order: those for it by name, and every
    one keyed by a predicate; worked out once per operator (again once a rule is registered)."""
    known = RUNNING.rules
    if known.get(None) != len(OPERATOR_RULES):  # None: how many rules there were when these were worked out
        known.clear()
        known[None] = len(OPERATOR_RULES)
    entries = known.get(func)
    if entries is None:
        entries = known[func] = tuple(e for e in OPERATOR_RULES if e.predicate is not None or func in e.ops)
    return entries


def run_operator(gpu: Simulation, func: Any, args: tuple, kwargs: dict, flat: list | None = None) -> Any:
    """Run ``func`` on simulated tensors: the first rule of :data:`OPERATOR_RULES` that matches it and does not hand
    it on (a rule of its own, the device check, a view at once, a read by the host, or a kernel). ``flat``: the
    leaves of ``(args, kwargs)`` where the caller has them already.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     x = torch.arange(6.0, device="cuda").view(2, 3)
        ...     (x.t() @ x).sum().item()
        153.0
    """
    call = OperatorCall(func, args, kwargs, flat)
    for entry in _rules_for(func):
        if entry.predicate is None or entry.predicate(call):  # entry.matches(call), its operators already picked
            out = entry.rule(gpu, call)
            if out is not NEXT:
                return out
    raise LookupError(f"no simulated rule runs {func}")  # never: the last rule takes any operator


@operator_rule(aten._local_scalar_dense.default)
def _item(gpu: Simulation, call: OperatorCall) -> Any:
    """``.item()``: a blocking copy to the host."""
    return gpu.to_host(call.args[0], non_blocking=False, pinned=False).item()


@operator_rule(aten.is_pinned.default)
def _is_pinned(gpu: Simulation, call: OperatorCall) -> bool:
    """GPU memory is not pinned host memory."""
    return False


@operator_rule(aten._to_copy.default)
def _to_copy(gpu: Simulation, call: OperatorCall) -> Any:
    """``.to(device)``: a copy to another device; a change of dtype alone is a kernel. A tensor that tells autograd it
    lives on the CPU (:func:`asynclab.sim.tensors.trains_here`) stays on its GPU when autograd casts it "to the CPU"."""
    args, kwargs = call.args, call.kwargs
    device = kwargs.get("device")
    if getattr(args[0], "trains", False) and device is not None and device.type == "cpu":
        return run_operator(gpu, aten._to_copy.default, args, {k: v for k, v in kwargs.items() if k != "device"})
    moved = _to_device(gpu, args[0], kwargs)
    return NEXT if moved is None else moved


@operator_rule(aten.copy_.default)
def _copy(gpu: Simulation, call: OperatorCall) -> Any:
    """``dst.copy_(src)`` between the host and a GPU or two GPUs: a copy; on one GPU, a kernel."""
    args, kwargs = call.args, call.kwargs
    if not (_any_host(args[:2]) or len(_devices(args)) > 1):
        return NEXT
    gpu.copy(args[0], args[1], bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking")))
    return args[0]


def _allocation(op: Any) -> Callable:
    """The rule of an operator that only allocates (``empty_like``, ``new_empty``): memory from the caching
    allocator, no kernel, as on a GPU; one that asks for another device than a GPU is handed on to the general path."""
    def rule(gpu: Simulation, call: OperatorCall) -> Any:
        args, kwargs = call.args, call.kwargs
        device = kwargs.get("device")
        if device is not None and torch.device(device).type != "cuda":
            return NEXT
        meta = op(*map_leaves(_meta, args), **{**kwargs, "device": "meta", "pin_memory": None})
        return gpu.allocate(meta, args[0].block.device if device is None else gpu.index(device))
    return rule


for _op in (aten.empty_like.default, aten.new_empty.default, aten.new_empty_strided.default):
    operator_rule(_op)(_allocation(_op))


#: PyTorch's C++ names of dtypes, as its error messages print them.
_CPP_DTYPE = {torch.float32: "float", torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16",
              torch.float64: "double"}


@operator_rule(aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default)
def _matrix_product(gpu: Simulation, call: OperatorCall) -> Any:
    """A matrix product of two dtypes raises at its launch, as the GPU's does (its meta kernel does not check)."""
    args = call.args
    a, b = (args[1], args[2]) if len(args) > 2 else (args[0], args[1])
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype != b.dtype:
        raise RuntimeError(f"expected mat1 and mat2 to have the same dtype, but got: "
                           f"{_CPP_DTYPE.get(a.dtype, a.dtype)} != {_CPP_DTYPE.get(b.dtype, b.dtype)}")
    return NEXT


# -- the general path: rules keyed by a predicate, tried in this order after the rules for named operators ---------
def _host_written(call: OperatorCall) -> list:
    """The host tensors the operator writes in place (a GPU kernel writes no host memory)."""
    written = call.facts.written
    return [t for t in _mutated(written, call.args, call.kwargs, torch.Tensor) if not isinstance(t, DeviceTensor)]


def _on_two_devices(call: OperatorCall) -> bool:
    """Whether the operator's tensors are on two devices: two GPUs, or a GPU and the host memory it reads (but a 0-d
    tensor) or writes."""
    return bool(any(isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor) and t.dim() > 0 for t in call.flat)
                or _host_written(call) or len(call.devices) > 1)


@operator_rule(_on_two_devices)
def _two_devices(gpu: Simulation, call: OperatorCall) -> Any:
    """PyTorch's refusal of an operator whose tensors are on two devices."""
    host = _host_tensors((call.args, call.kwargs)) or _host_written(call)
    names = sorted({f"cuda:{d}" for d in call.devices} | ({"cpu"} if host else set()))
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                       f"{names[0]} and {names[1]}!")


def _a_view(call: OperatorCall) -> bool:
    return call.facts.is_view


@operator_rule(_a_view)
def _view(gpu: Simulation, call: OperatorCall) -> Any:
    """A view: at once, on the memory of its base (no kernel)."""
    args, kwargs = call.args, call.kwargs
    base = next(t for t in call.flat if isinstance(t, DeviceTensor))
    views = call.func(*map_leaves(_elem, args), **map_leaves(_elem, kwargs))
    with torch.inference_mode(base.is_inference()):  # a view is an inference tensor if its base is one
        return map_leaves(lambda o: DeviceTensor(o, base.block) if isinstance(o, torch.Tensor) else o, views)


def _host_reads(call: OperatorCall) -> bool:
    return call.shapes is READ_BY_HOST


@operator_rule(_host_reads)
def _read_by_host(gpu: Simulation, call: OperatorCall) -> Any:
    """An operator whose result the host must read (a size that depends on the data, or a Python value): a kernel on
    the current stream that reads its inputs when it starts, and the host waits for it, as CUDA's ``nonzero`` does."""
    func, args, kwargs, device = call.func, call.args, call.kwargs, call.device(gpu)
    box: list = []
    read = _on_cpu if gpu.computes else _garbage  # timing only: what the host reads is garbage, the same every run
    eargs, ekwargs = map_leaves(read, args), map_leaves(read, kwargs)

    def at_start() -> None:
        box.append(func(*eargs, **ekwargs))
    _, end = gpu.queue(func._schema.name.split("::")[-1], gpu.current(device), gpu.KERNEL_MS, at_start)
    gpu.sync_report()
    gpu.wait_until(end)
    gpu.catch_up()
    result = box[0]

    def on_gpu(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        out = gpu.allocate(value, device)
        out.elem.copy_(value)
        return out
    return map_leaves(on_gpu, result)


#: How many operators' output shapes :data:`asynclab.sim.running.RUNNING` keeps (:func:`_shapes`).
_SHAPES_KEPT = 4096
_TENSOR = object()  # marks a tensor in a signature


def _signature(x: Any) -> Any:
    """What an operator's output shapes depend on: its tensors' dtypes, sizes and strides, and its other arguments."""
    if isinstance(x, torch.Tensor):
        return _TENSOR, x.dtype, tuple(x.shape), x.stride(), x.storage_offset(), isinstance(x, DeviceTensor)
    if isinstance(x, (tuple, list)):
        return tuple([_signature(v) for v in x])
    if isinstance(x, dict):
        return tuple([(k, _signature(v)) for k, v in x.items()])
    return x


def _shapes(func: Any, args: tuple, kwargs: dict) -> Any:
    """The operator's outputs as meta tensors (their sizes, strides and dtypes): from PyTorch's meta kernels, once for
    each operator and signature of its arguments (a training loop asks the same ones again and again).

    Example:
        >>> a = torch.empty(2, 3)
        >>> [_shapes(aten.mm.default, (a, a.t()), {}).shape for _ in range(2)], len(RUNNING.shapes) > 0
        ([torch.Size([2, 2]), torch.Size([2, 2])], True)
    """
    try:
        key = (func, _signature(args), _signature(kwargs))
        known = RUNNING.shapes.get(key)
    except TypeError:  # an argument that cannot be a key (a SymInt's expression, say): worked out each time
        key, known = None, None
    if known is not None:
        return map_leaves(lambda m: torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device="meta"), known)
    shapes = func(*map_leaves(_meta, args), **map_leaves(_meta, kwargs))
    if key is not None and leaves(shapes) and all(isinstance(o, torch.Tensor) for o in leaves(shapes)):
        if len(RUNNING.shapes) >= _SHAPES_KEPT:
            RUNNING.shapes.clear()
        RUNNING.shapes[key] = shapes
    return shapes


def _returns(func: Any, shapes: Any) -> list:
    """The schema's return for each output tensor in ``shapes`` (in :func:`leaves` order: an optional output the
    operator did not make is not there; a list of tensors takes its return once per tensor)."""
    returns = func._schema.returns
    outs = shapes if isinstance(shapes, tuple) and len(returns) > 1 else (shapes,)
    return [ret for ret, out in zip(returns, outs) for _ in leaves(out)]


def _any_operator(call: OperatorCall) -> bool:
    return True


@operator_rule(_any_operator)
def _kernel(gpu: Simulation, call: OperatorCall) -> Any:
    """Any other operator: a kernel on the current stream, which reads its inputs when it starts and writes its
    outputs (new memory, and the tensors it mutates) when it ends."""
    func, args, kwargs, shapes, device = call.func, call.args, call.kwargs, call.shapes, call.device(gpu)
    mutated = _mutated(call.facts.written, args, kwargs)
    name = call.facts.name
    flat = leaves(shapes)
    written = iter(mutated)
    outputs = []
    for meta, ret in zip(flat, _returns(func, shapes)):
        aliased = ret.alias_info is not None and ret.alias_info.is_write
        outputs.append(next(written, None) if aliased else gpu.allocate(meta, device))
    stream = gpu.current(device)
    # the work holds the memory, never the tensors: a tensor freed while its work is queued frees its memory
    eargs, ekwargs = map_leaves(_on_cpu, args), map_leaves(_on_cpu, kwargs)
    written_to = [t.elem for t in mutated]
    fresh = [None if t is None or any(t is m for m in mutated) else t.elem for t in outputs]

    def at_start() -> Any:
        if not gpu.computes:  # timing only: the memory keeps what it held
            return None
        clones = {id(e): e.clone() for e in written_to}
        swap = lambda x: clones.get(id(x), x) if isinstance(x, torch.Tensor) else x  # noqa: E731
        try:
            values = leaves(func(*map_leaves(swap, eargs), **map_leaves(swap, ekwargs)))
        except Exception as err:  # noqa: BLE001 - the host hears of it at its next wait, as of a device-side error
            gpu.failed.append(f"{name} ({type(err).__name__}: {str(err).splitlines()[0][:120]})")
            return lambda: [e.fill_(float("nan") if e.dtype.is_floating_point else -1)
                            for e in [f for f in fresh if f is not None] + written_to]

        def at_end() -> None:
            for out, value in zip(fresh, values):
                if out is not None and isinstance(value, torch.Tensor):
                    out.copy_(value)
            for e in written_to:
                e.copy_(clones[id(e)])
        return at_end

    # what it reads: the memory of its GPU tensors among the leaves of (eargs, ekwargs), which map call.flat's in order
    elems = {id(x.elem) for x in call.flat if isinstance(x, DeviceTensor)}
    reads = tuple(t for t in map(_on_cpu, call.flat) if isinstance(t, torch.Tensor) and id(t) in elems)
    made_or_written = [o for o in outputs if o is not None] or mutated  # an in-place op of no return writes its inputs
    ms, fill, memory = kernel_cost(gpu, func, (args, kwargs), made_or_written, call.flat)
    product = name in CUBLAS_PRODUCTS
    nbytes = memcpy_bytes(name, args, made_or_written)
    if nbytes is not None:  # PyTorch copies these with cudaMemcpyAsync (aten/src/ATen/native/cuda/Copy.cu)
        name, ms = "Memcpy DtoD (Device -> Device)", gpu.D2D_LATENCY_MS + 2 * nbytes / gpu.MEMORY_BYTES_PER_MS
    gpu.queue(name, stream, ms, at_start, cat="kernel" if nbytes is None else "gpu_memcpy", fill=fill, memory=memory,
              reads=reads,
              writes=tuple(f for f in fresh if f is not None) + tuple(written_to), holds=product,
              waves=product_rounds(gpu, made_or_written[0], ms) if product and made_or_written else ())
    made = iter([o if o is not None else m for o, m in zip(outputs, flat)])
    return map_leaves(lambda _: next(made), shapes)


def _to_device(gpu: Simulation, src: Any, kwargs: dict) -> Any:
    """``_to_copy`` to another device: a copy to the host or to the other GPU (None: the same device, a kernel)."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    non_blocking = bool(kwargs.get("non_blocking", False))
    here = src.block.device if isinstance(src, DeviceTensor) else None
    if device is None or (device.type == "cuda" and (device.index if device.index is not None else gpu.device) == here):
        return None
    like = torch.empty_strided(src.shape, src.stride(), dtype=dtype or src.dtype)
    if device.type == "cpu":
        host = gpu.to_host(src, non_blocking=non_blocking, pinned=non_blocking)
        return host if dtype in (None, src.dtype) else host.to(dtype)
    target = gpu.allocate(like, gpu.index(device))
    gpu.copy(target, src, non_blocking)
    return target


#: Bytes from which a new host tensor always gets fresh pages from the system: glibc's malloc maps a block this large
#: or larger anew each time (its mmap threshold grows with the blocks freed, up to DEFAULT_MMAP_THRESHOLD_MAX, 32 MiB
#: on a 64-bit system), where a smaller one may reuse pages the process has written before.
FRESH_PAGES_FROM = 32 * 2**20


def copy_between(gpu: Simulation, dst: torch.Tensor, src: torch.Tensor, non_blocking: bool,
                 fresh_pages: bool = False) -> None:
    """``dst.copy_(src)`` where one side is host memory or the two sides are different GPUs. ``fresh_pages``: ``dst``
    is new pageable host memory whose pages the copy writes first (each page's first touch costs the host's kernel
    time: the card's ``first_touch_gbps`` where it gives one).

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     host = torch.ones(2).pin_memory()
        ...     x = host.to("cuda", non_blocking=True)
        ...     ev = gpu.trace().events
        ...     ev.loc[ev["kind"] == "h2d", "name"].tolist()
        ['Memcpy HtoD (Pinned -> Device)']
    """
    to_gpu, from_gpu = isinstance(dst, DeviceTensor), isinstance(src, DeviceTensor)
    if from_gpu and id(src.block) in gpu.late_copies:  # a big copy: it starts late (Backend.late_copies)
        with torch.cuda.device(src.block.device):
            gpu.spin(gpu.late_copies[id(src.block)])
    nbytes = src.numel() * src.element_size()
    if to_gpu and from_gpu:
        return _peer_copy(gpu, dst, src, nbytes)
    gpu_side, host_side = (dst, src) if to_gpu else (src, dst)
    pinned = gpu.is_pinned_memory(host_side)
    direction = "HtoD" if to_gpu else "DtoH"
    memory = "Pinned" if pinned else "Pageable"
    name = f"Memcpy {direction} ({memory} -> Device)" if to_gpu else f"Memcpy {direction} (Device -> {memory})"
    rate = gpu.PINNED_BYTES_PER_MS if pinned else gpu.PAGEABLE_BYTES_PER_MS
    touch_ms = nbytes / gpu.FIRST_TOUCH_BYTES_PER_MS if fresh_pages and gpu.FIRST_TOUCH_BYTES_PER_MS else 0.0
    staged = _raw(src).clone() if to_gpu and not pinned and gpu.computes else None  # the host stages pageable data
    source, target = _raw(src), _raw(dst)  # the memory, not the tensors (see _kernel)

    def at_start() -> Any:
        if not gpu.computes:  # timing only: the memory keeps what it held
            return None
        value = staged if staged is not None else source.clone()
        return lambda: target.copy_(value)

    device = gpu_side.block.device
    _, end = gpu.queue(name, gpu.current(device), gpu.COPY_LATENCY_MS + nbytes / rate + touch_ms, at_start,
                       cat="gpu_memcpy",
                       engine=(device, direction), reads=() if to_gpu and not pinned else (source,), writes=(target,))
    if pinned:  # the caching host allocator keeps the pinned block from reuse until the copy has ended
        gpu.pinned.used(host_side, end)
    # the host waits for the copy, but for one that is non-blocking from pinned memory, or from pageable memory to the
    # GPU that fits the driver's staging buffer (the driver stages the data at once and returns; the copy runs in the
    # stream's order)
    staging = gpu.PAGEABLE_STAGING_BYTES
    if not (non_blocking and (pinned or to_gpu)):
        gpu.sync_report()
        gpu.wait_until(end)
        gpu.copy_waited()
    elif to_gpu and not pinned and staging is not None and nbytes > staging:
        # past the buffer, each fill waits for the last to land (inside the driver's call: not a sync PyTorch sees)
        gpu.wait_until(end - staging / rate)
    gpu.catch_up()


def _peer_copy(gpu: Simulation, dst: DeviceTensor, src: DeviceTensor, nbytes: int) -> None:
    """A copy between GPUs (or within one), as PyTorch issues it: on the source GPU's current stream, after the
    destination's current stream, which then waits for the copy (aten/src/ATen/native/cuda/Copy.cu)."""
    from asynclab.sim.cuda import default_stream_of

    sender, receiver = gpu.current(src.block.device), gpu.current(dst.block.device)
    same = src.block.device == dst.block.device
    rate = gpu.MEMORY_BYTES_PER_MS if same else (gpu.PEER_BYTES_PER_MS if gpu.peer_access else gpu.PAGEABLE_BYTES_PER_MS)
    name = "Memcpy DtoD (Device -> Device)" if same else "Memcpy PtoP (Device -> Device)"

    source, target = src.elem, dst.elem

    def at_start() -> Any:
        if not gpu.computes:  # timing only
            return None
        value = source.clone()
        return lambda: target.copy_(value)
    latency = gpu.COPY_LATENCY_MS if same else gpu.PEER_COPY_MS  # a copy between GPUs carries PyTorch's barrier
    _, end = gpu.queue(name, sender, latency + nbytes / rate, at_start, cat="gpu_memcpy", after=gpu.ready(receiver),
                       reads=(source,), writes=(target,))
    if not same:
        gpu.set_ready(receiver, max(gpu.ready(receiver), end))
        if sender is default_stream_of(src.block.device):  # the legacy default streams: the other GPU's waits too
            other = default_stream_of(dst.block.device)
            gpu.set_ready(other, max(gpu.ready(other), end))

