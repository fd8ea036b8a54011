"""``al.simulate``: run any PyTorch code on simulated H100s and get the trace torch.profiler would write, in predicted times.

The run goes through the simulated GPU of the exercise checkers (:class:`asynclab.sim.device.SimGPU`: streams,
events, the caching allocator, copy engines, pinned and pageable memory, the host's waits), with the whole cost
model of a card's figures (:mod:`asynclab.sim.figures`): besides the checkers' rates, the host's time per operator,
cudaMalloc and cudaFree, new pinned memory, and the launch queue's depth. Autograd's backward pass runs too, and
``torch.autocast("cuda")`` casts as on a GPU. Every number it gives is a prediction ("simulated H100
(predicted)"), never a measurement.
"""
from __future__ import annotations

import contextlib
import gc
import gzip
import heapq
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.overrides import TorchFunctionMode

from asynclab.sim.device import SimGPU
from asynclab.sim.simulation import FreeHost
from asynclab.sim.figures import card_figures, rates
from asynclab.sim.kernel_costs import CUBLAS_PRODUCTS, MATMULS
from asynclab.sim.nest import leaves
from asynclab.sim.ops import schema_facts
from asynclab.sim.refusals import refusals
from asynclab.sim.tensors import DeviceTensor
from asynclab.sim.trace import document_of

__all__ = ["HostCosts", "predictor", "run_simulated", "older_objects_frozen", "RANDOM", "host_tensors_made", "simulate", "running_predictor", "record_predicted", "save_document", "LOWER_PRECISION", "FULL_PRECISION"]

#: Functions ``torch.autocast("cuda")`` runs in its 16-bit dtype (PyTorch's CUDA autocast list, the common ones).
LOWER_PRECISION = frozenset({"linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm", "addbmm",
                             "addmv", "mv", "einsum", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                             "conv_transpose2d", "conv_transpose3d", "scaled_dot_product_attention", "prelu"})
#: Functions it runs in float32.
FULL_PRECISION = frozenset({"softmax", "log_softmax", "cross_entropy", "nll_loss", "layer_norm", "group_norm",
                            "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits", "cumsum",
                            "exp", "log", "pow", "norm", "kl_div", "cosine_similarity"})


#: Functions whose work on the host is making random numbers, one at a time (PyTorch's CPU generator).
RANDOM = frozenset({"randn", "rand", "randint", "randperm", "normal", "normal_", "uniform_", "random_", "bernoulli",
                    "bernoulli_", "multinomial", "randn_like", "rand_like", "randint_like", "exponential_"})

#: Host factories that write nothing into the memory they get: an operator's time, no bytes.
UNWRITTEN = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


def host_tensors_made(args: Any, out: Any) -> list[torch.Tensor]:
    """The host tensors a function on host tensors wrote: its new ones, and those it changed in place (returned
    as themselves); a view of an argument (the same memory, another tensor) is none.

    Example:
        >>> x = torch.zeros(4)
        >>> [len(host_tensors_made((x,), y)) for y in (x + 1, x.add_(1), x[:2])]
        [1, 1, 0]
    """
    ins = [t for t in leaves(args) if isinstance(t, torch.Tensor)]
    with torch._C.DisableTorchFunctionSubclass():
        memory = {t.untyped_storage().data_ptr() for t in ins if t.device.type == "cpu"}
        return [t for t in leaves(out) if isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor)
                and t.device.type == "cpu" and (any(t is a for a in ins) or t.untyped_storage().data_ptr() not in memory)]


class _Autocast(TorchFunctionMode):
    """``torch.autocast("cuda")`` on simulated tensors: PyTorch casts only tensors its C++ side sees on a GPU, which
    simulated tensors that run autograd are not, so the casts are made here, as autograd records them."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in LOWER_PRECISION or name in FULL_PRECISION:
            lower = _autocast_dtype()
            if lower is not None:
                dtype = torch.float32 if name in FULL_PRECISION else lower
                args, kwargs = _cast(args, dtype), {k: _cast(v, dtype) for k, v in kwargs.items()}
        return func(*args, **kwargs)


def _autocast_dtype() -> torch.dtype | None:
    """The dtype ``torch.autocast("cuda")`` casts to now, None when it is off (PyTorch 2.4 and later name the device;
    before, the functions without arguments are CUDA's)."""
    try:
        on = torch.is_autocast_enabled("cuda")
    except TypeError:
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
    return torch.get_autocast_dtype("cuda") if on else None


def _cast(value: Any, dtype: torch.dtype) -> Any:
    """Floating-point GPU tensors in ``value`` (a tensor or a list or tuple of them) as ``dtype``."""
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    if isinstance(value, torch.Tensor) and value.is_cuda and value.is_floating_point() and value.dtype != dtype:
        return value.to(dtype)
    return value


#: Operators that record no backward node even where an input requires grad.
_NOT_RECORDED = frozenset({"detach", "alias", "_local_scalar_dense", "is_nonzero", "equal", "ones_like", "zeros_like",
                           "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "eq", "ne", "lt", "le",
                           "gt", "ge", "argmax", "argmin", "isnan", "isinf", "isfinite"})


class HostCosts(FreeHost):
    """``al.simulate``'s host-cost policy: a card's whole cost model of the host's own work, which a
    :class:`asynclab.sim.device.SimGPU` handed it (:func:`predictor`) calls at named points; autograd runs too.

    Besides a checker's GPU, each operator costs the host ``HOST_OP_MS`` (a matrix product, cuBLAS's call,
    ``HOST_MATMUL_MS``; a ``cpu_op`` row in the trace),
    autograd ``AUTOGRAD_RECORD_MS`` for each operator that records a backward node, ``BACKWARD_CALL_MS`` for each
    backward call and ``AUTOGRAD_NODE_MS`` for each node its engine runs, an optimizer's step ``OPTIMIZER_STEP_MS``
    and ``OPTIMIZER_PARAM_MS`` per parameter (by optimizer),
    each stream call (``wait_stream``, an event's record or wait, a change of the current stream) ``STREAM_CALL_MS``,
    each blocking copy between the host and a GPU a round trip of ``BLOCKING_COPY_MS`` once it landed,
    memory new to the caching allocator costs ``MALLOC_MS``, ``torch.cuda.empty_cache()`` waits for the GPU and costs
    ``FREE_MS`` per block, a pinned block the caching host allocator cannot serve from its cache costs
    ``HOST_ALLOC_MS`` and its bytes at ``HOST_ALLOC_BYTES_PER_MS``, the first matrix product of a dtype
    ``MATMUL_LOAD_MS`` (:meth:`loading_ms`), and the host blocks when ``LAUNCH_QUEUE_DEPTH`` launches wait. The
    figures are the GPU's (its card's), read from it at each use. What it records (the host's operators, its clock
    readings and elapsed times) goes into :func:`simulate`'s trace.

    Example:
        >>> with predictor() as gpu:
        ...     x = torch.ones(1024, device="cuda")
        ...     y = (x * 2).sum().item()
        >>> y, [name for name, *_ in gpu.costs.ops]
        (2048.0, ['aten::ones', 'aten::mul', 'aten::sum', 'aten::_local_scalar_dense'])
    """

    trains = True

    def __init__(self) -> None:
        self.gpu: Any = None
        self.ops: list[tuple[str, float, float]] = []  # the host's operators: (name, start, end)
        self.clock_reads: list[float] = []  # when the code read a host clock (ms)
        self.elapsed: list[float] = []  # what the code's elapsed_time calls gave (ms)
        self._unstarted: list[float] = []  # starts of launched work not yet started (a heap)
        self._loaded: set[tuple] = set()  # (device, dtype) whose matrix products' kernels cuBLAS has loaded
        self._node, self._node_row, self._steps, self._task = None, None, {}, None

    def attach(self, gpu: Any) -> None:
        self.gpu = gpu

    def enter(self) -> None:
        self._autocast = _Autocast()
        self._autocast.__enter__()
        self._node, self._node_row, self._steps, self._task = None, None, {}, None
        self._step_hooks = [register_optimizer_step_pre_hook(self._step_starts),
                            register_optimizer_step_post_hook(self._step_ends)]

    def exit(self, *exc: Any) -> None:
        for hook in self._step_hooks:
            hook.remove()
        self._end_node()
        self._autocast.__exit__(*exc)

    def operator_starts(self, func: Any, args: tuple, kwargs: dict, flat: list | None = None) -> tuple[str, float]:
        """The operator's host time from Python, before the GPU runs it: autograd's engine around a backward node,
        the operator's own time (a view's: next to nothing), cuBLAS's loading, autograd's recording (``flat``: the
        leaves of ``(args, kwargs)``, where the caller has them). The host's clock moves once, by these in turn (the
        GPU's work catches up to where it ends, as it would step by step: nothing here reads what that work does)."""
        gpu = self.gpu
        self._backward_node()
        start = host = gpu.host
        name, _, returns_view = schema_facts(func)[:3]
        if func._schema.returns and not returns_view:  # an in-place op (x.add_) costs as much as any; a view next to nothing
            host += self.host_op_ms(name)
            host += self.loading_ms(name, args)
        host += self._recording_ms(name, args, kwargs, flat)
        gpu.host = host
        return name, start

    def operator_ends(self, func: Any, started: tuple[str, float]) -> None:
        name, start = started
        end = self.gpu.host
        self.ops.append((f"aten::{name}", start, end))
        if self._node_row is not None:
            self._node_row[2] = end

    def host_op_ms(self, name: str) -> float:
        """The host's time for the operator ``name`` from Python, besides its launch: the card's figure for an
        operator whose library does host-side work first (``HOST_LIBRARY_MS``: cuDNN's convolutions and batch norms,
        where the card gives them), a matrix product's, or any operator's.

        Example:
            >>> costs = predictor(card="H200").costs
            >>> [round(costs.host_op_ms(n) * 1e3, 1) for n in ("add", "mm", "convolution")]  # µs
            [11.0, 22.7, 54.6]
        """
        library = self.gpu.HOST_LIBRARY_MS.get(name)
        if library is not None:
            return library
        return self.gpu.HOST_MATMUL_MS if name in MATMULS else self.gpu.HOST_OP_MS

    def loading_ms(self, name: str, args: tuple) -> float:
        """``MATMUL_LOAD_MS`` for the first matrix product of a dtype on a GPU in this simulation (a fresh process, for
        the code it runs): cuBLAS loads its kernels then. A convolution's cuDNN, and the first launch of other kernels
        (CUDA loads a kernel's module on its first use), are left out.

        Example:
            >>> with predictor() as gpu:
            ...     a = torch.ones(64, 64, device="cuda")
            ...     t0 = gpu.host; _ = a @ a; first = gpu.host - t0
            ...     t0 = gpu.host; _ = a @ a; then = gpu.host - t0
            >>> first - then == gpu.MATMUL_LOAD_MS
            True
        """
        if name not in CUBLAS_PRODUCTS:
            return 0.0
        t = next((a for a in leaves(args) if isinstance(a, torch.Tensor) and a.device.type == "cuda"), None)
        key = None if t is None else (self.gpu.index(t.device), t.dtype)
        if key is None or key in self._loaded:
            return 0.0
        self._loaded.add(key)
        return self.gpu.MATMUL_LOAD_MS

    def _backward_node(self) -> None:
        """Autograd's engine, in the backward pass: ``BACKWARD_CALL_MS`` before the first node of each backward call
        (a graph task of its own), ``AUTOGRAD_NODE_MS`` for each node it runs, before the node's first operator, and
        the node's operators as a ``cpu_op`` row around them (``autograd::engine::evaluate_function: <node>``, as
        torch.profiler names it)."""
        node = torch._C._current_autograd_node()
        if node is self._node:
            return
        self._end_node()
        self._node = node
        if node is not None:  # the row starts at the node's first operator: only a profiler's own time comes between
            gpu = self.gpu
            task = torch._C._current_graph_task_id()
            if task != self._task:
                self._task = task
                gpu.host += gpu.BACKWARD_CALL_MS
            gpu.host += gpu.AUTOGRAD_NODE_MS
            self._node_row = [f"autograd::engine::evaluate_function: {node.name()}", gpu.host, gpu.host]

    def _end_node(self) -> None:
        if self._node_row is not None:
            self.ops.append(tuple(self._node_row))
        self._node, self._node_row = None, None  # a node holds its graph's tensors: let it go

    def _recording_ms(self, name: str, args: tuple, kwargs: dict, flat: list | None = None) -> float:
        """In the forward pass, ``AUTOGRAD_RECORD_MS`` for an operator that records a backward node (grad mode on, an
        input that requires grad; ``flat``: the leaves of ``(args, kwargs)``, where the caller has them)."""
        if self._node is not None or name in _NOT_RECORDED or not torch.is_grad_enabled():
            return 0.0
        wants = any(isinstance(t, torch.Tensor) and t.requires_grad
                    for t in (leaves((args, kwargs)) if flat is None else flat))
        return self.gpu.AUTOGRAD_RECORD_MS if wants else 0.0

    def _step_starts(self, optimizer: Any, *_: Any) -> None:
        """An optimizer's step costs the host ``OPTIMIZER_STEP_MS`` and ``OPTIMIZER_PARAM_MS`` per parameter with a
        gradient, by its class (or the class it derives from): its Python around the parameters and the Python that
        gathers each parameter's state; another optimizer costs its operators alone. The step is a ``cpu_op`` row,
        ``Optimizer.step#<class>.step``, as torch.profiler names it."""
        gpu = self.gpu
        self._end_node()
        self._steps[id(optimizer)] = gpu.host
        kind = next((c.__name__ for c in type(optimizer).__mro__ if c.__name__ in gpu.OPTIMIZER_PARAM_MS), None)
        n = sum(p.grad is not None for group in optimizer.param_groups for p in group["params"])
        if n:  # a step over no gradients skips the work both figures price
            gpu.host += gpu.OPTIMIZER_STEP_MS.get(kind, 0.0) + gpu.OPTIMIZER_PARAM_MS.get(kind, 0.0) * n

    def _step_ends(self, optimizer: Any, *_: Any) -> None:
        start = self._steps.pop(id(optimizer), self.gpu.host)
        self.ops.append((f"Optimizer.step#{type(optimizer).__name__}.step", start, self.gpu.host))

    def copy_waited(self) -> None:
        """A blocking copy between the host and a GPU costs the host ``BLOCKING_COPY_MS`` once it has landed: the
        driver's round trip (staging through its pinned buffer, waking the host)."""
        self.gpu.host += self.gpu.BLOCKING_COPY_MS

    def stream_call(self, name: str) -> None:
        """A stream call from Python costs the host ``STREAM_CALL_MS`` (a ``cpu_op`` row in the trace)."""
        start = self.gpu.host
        self.gpu.host += self.gpu.STREAM_CALL_MS
        self.ops.append((f"torch.cuda.{name}", start, self.gpu.host))

    def host_work(self, name: str, args: Any, out: Any) -> None:
        """The host's own tensor work (``torch.randn`` of a host tensor, a ``tanh``, a DataLoader's stacking): an
        operator's ``HOST_OP_MS``, and its random numbers at ``HOST_RANDOM_MS`` each or its bytes in and out at
        ``HOST_BYTES_PER_MS`` (an ``empty``: no bytes); a view costs nothing (:func:`host_tensors_made`).

        Example:
            >>> with predictor() as gpu:
            ...     before = gpu.host
            ...     x = torch.randn(1000, 1000)
            ...     view = x[:10]
            >>> round(gpu.host - before, 2)  # ms: a million numbers from the host's generator
            5.91
        """
        gpu = self.gpu
        made = host_tensors_made(args, out)
        if not made:
            return
        if name in RANDOM:
            ms = sum(t.numel() for t in made) * gpu.HOST_RANDOM_MS
        elif name in UNWRITTEN:
            ms = 0.0
        else:
            ins = [t for t in leaves(args) if isinstance(t, torch.Tensor) and t.device.type == "cpu"]
            ms = sum(t.numel() * t.element_size() for t in made + ins) / gpu.HOST_BYTES_PER_MS
        start = gpu.host
        gpu.host += gpu.HOST_OP_MS + ms
        self.ops.append((f"aten::{name.strip('_') or name}", start, gpu.host))  # tensor.__mul__: aten::mul

    def factory_starts(self) -> float:
        """A factory (``torch.ones(..., device="cuda")``): an operator of the host's, too."""
        start = self.gpu.host
        self.gpu.host += self.gpu.HOST_OP_MS
        return start

    def factory_ends(self, name: str, started: float) -> None:
        self.ops.append((f"aten::{name}", started, self.gpu.host))

    def launch_starts(self, launched: bool) -> None:
        """The host blocks while ``LAUNCH_QUEUE_DEPTH`` launches wait to start (a CUDA graph's work holds no place of
        its own in the launch queue)."""
        if not launched:
            return
        host = self.gpu.host
        while self._unstarted and self._unstarted[0] <= host:
            heapq.heappop(self._unstarted)
        if len(self._unstarted) >= self.gpu.LAUNCH_QUEUE_DEPTH:  # the queue is full: the host waits for a place
            self.gpu.wait_until(heapq.heappop(self._unstarted))

    def launch_ends(self, launched: bool, start: float) -> None:
        if launched:
            heapq.heappush(self._unstarted, start)

    def new_memory(self, blocks: int) -> None:
        """Each block new to the caching allocator (cudaMalloc) costs the host ``MALLOC_MS``."""
        self.gpu.host += self.gpu.MALLOC_MS * blocks

    def host_alloc(self, nbytes: int) -> None:
        """A new pinned block (``cudaHostAlloc``) costs the host ``HOST_ALLOC_MS`` and its bytes at
        ``HOST_ALLOC_BYTES_PER_MS``: the driver page-locks the memory.

        Example:
            >>> with predictor() as gpu:
            ...     before = gpu.host
            ...     fresh = torch.empty(1 << 26, dtype=torch.uint8, pin_memory=True)
            ...     del fresh
            ...     middle = gpu.host
            ...     cached = torch.empty(1 << 26, dtype=torch.uint8, pin_memory=True)  # the block kept from before
            >>> round(middle - before, 1), round(gpu.host - middle, 3)  # ms: 64 MiB pinned afresh, then reused
            (22.2, 0.011)
        """
        self.gpu.host += self.gpu.HOST_ALLOC_MS + nbytes / self.gpu.HOST_ALLOC_BYTES_PER_MS

    def emptying_cache(self) -> None:
        """``torch.cuda.empty_cache()``: each cached block goes back with a cudaFree, which waits for the GPU."""
        gpu = self.gpu
        blocks = gpu.memory.cached_blocks()
        if blocks:
            for device in range(gpu.devices):
                gpu.synchronize(device)
            gpu.host += gpu.FREE_MS * blocks

    def timer_read(self, kind: str, ms: float) -> None:
        (self.clock_reads if kind == "clock" else self.elapsed).append(ms)

    def forget_past(self) -> None:
        self.ops.clear(), self.clock_reads.clear(), self.elapsed.clear()


def predictor(gpus: int = 1, card: str = "H100", computes: bool = True) -> SimGPU:
    """Simulated GPUs with ``card``'s whole cost model, that run autograd: what :func:`simulate` runs code on (a
    :class:`asynclab.sim.device.SimGPU` with the :class:`HostCosts` policy). With ``computes=False`` the GPUs' work
    is timed but moves no values (what the host reads is garbage): a large model then runs in seconds.

    Example:
        >>> with predictor(computes=False) as gpu:
        ...     _ = torch.ones(8, device="cuda") * 2
        >>> type(gpu.costs).__name__, gpu.trains, [name for name, *_ in gpu.costs.ops]
        ('HostCosts', True, ['aten::ones', 'aten::mul'])
    """
    return SimGPU(devices=gpus, card=card, computes=computes, costs=HostCosts())


def simulate(fn: Callable[..., Any], *args: Any, gpus: int = 1, steps: int | None = None, warmup: int = 1,
             setup: Callable[[], Any] | None = None, card: str = "H100", values: bool = True,
             path: str | os.PathLike | None = None, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` on ``gpus`` simulated GPUs (``card``'s figures; even where the machine has a GPU)
    and return the :class:`asynclab.trace.Trace` torch.profiler would write of it, in predicted times.

    - ``steps=None``: ``fn`` runs once, and the trace holds all of it.
    - ``steps=n``: ``fn`` runs ``warmup`` times, then ``n`` times, each inside a ``ProfilerStep#k`` range (k from
      ``warmup``), as ``torch.profiler.profile(schedule=...)`` with ``prof.step()`` records them; the trace holds
      the ``n`` steps. ``al.diagnose``, ``al.step_breakdown`` and ``al.draw_timeline`` read it as a recording.
    - ``setup``: run once in the simulation first (build the model there: its tensors must be simulated ones); its
      result, when not None, is passed to ``fn`` as the first argument.
    - ``values=False``: the GPUs' work is timed, not computed: kernels, factories and copies move no values, and
      whatever the host reads back is garbage (NaN, or -1), the same every run. A large model runs in seconds, in
      little of the machine's memory.
    - ``path`` (``.json`` or ``.json.gz``): the trace is saved there too, and opens in Perfetto.

    Each call runs as a fresh process would: its first matrix product of each data type pays cuBLAS's loading of its
    kernels (the card's ``matmul_load_ms``; with ``steps``, in the warm-up).

    The trace has the host's operators (``cpu_op`` rows, ``aten::...``), their launches, kernels and copies on their
    streams, ``record_function`` ranges and the steps. Its ``meta["simulated"]`` holds the card, ``predicted`` (True),
    ``step_ms`` (each step's time, from one ``ProfilerStep`` to the next), ``clock_reads_ms`` (when the code read a
    host clock such as ``time.perf_counter``; their differences, ``timed_ms``, are the intervals it measured) and
    ``elapsed_ms`` (what its CUDA events' ``elapsed_time`` gave), and ``returned`` (``fn``'s last result, when it is a
    number or a list of numbers). These names are this function's own: ``fn`` cannot take keywords of the same names.

    Example:
        >>> def step():
        ...     x = torch.randn(256, 256, device="cuda")
        ...     return (x @ x).sum().item()
        >>> t = simulate(step, steps=2)
        >>> t.meta["simulated"]["card"], len(t.meta["simulated"]["step_ms"])
        ('NVIDIA H100 80GB HBM3', 2)
        >>> sorted(set(t.events["kind"]))
        ['annotation', 'compute', 'cpu_op', 'd2h', 'gpu_annotation', 'launch']
    """
    if not callable(fn) or (setup is not None and not callable(setup)):
        raise TypeError(f"simulate needs a function to run, not {type(fn if not callable(fn) else setup).__name__}")
    _check_gpus(gpus)
    if steps is not None and not (isinstance(steps, int) and steps >= 1) or not (isinstance(warmup, int) and warmup >= 0):
        raise ValueError(f"steps must be a whole number of at least 1 (or None), warmup at least 0: {steps!r}, {warmup!r}")
    out = _output(path)
    with older_objects_frozen():
        with refusals(), predictor(gpus=gpus, card=card, computes=values) as gpu:
            state = setup() if setup is not None else None
            call = (lambda: fn(state, *args, **kwargs)) if state is not None else (lambda: fn(*args, **kwargs))
            result, starts = _run_steps(gpu, call, steps, warmup)
            gpu.finish()
            del state, call
        gc.collect()  # the simulation's patches and memory form cycles: free its tensors now, not at some later gc pass
    doc = document_of(gpu.ran, gpu.launches, gpu.annotations, gpu.costs.ops, _header(gpu, starts, result))
    if out is not None:
        save_document(doc, out)
    from asynclab.trace import load_trace

    trace = load_trace(doc)
    trace.source = str(out) if out is not None else "<simulated>"
    return trace


def run_simulated(fn: Callable[[], Any], gpus: int = 1, card: str = "H100", values: bool = True) -> SimGPU:
    """Run ``fn()`` once on ``gpus`` simulated ``card`` GPUs as :func:`simulate` does, without making the trace of
    the whole run: the simulated GPU after it (``gpu.ran``: what ran), for a caller that keeps what ``fn`` recorded
    itself (an experiment cell's profiled run). A ValueError says that nothing ran, as :func:`simulate`'s does.

    Example:
        >>> gpu = run_simulated(lambda: torch.ones(8, device="cuda") * 2, card="H200")
        >>> [row[1] for row in gpu.ran]
        ['ones', 'mul']
        >>> run_simulated(lambda: None)
        Traceback (most recent call last):
        ...
        ValueError: nothing ran on the simulated GPU
    """
    _check_gpus(gpus)
    with older_objects_frozen():
        with refusals(), predictor(gpus=gpus, card=card, computes=values) as gpu:
            gpu.forget_past()
            fn()
            gpu.finish()
        gc.collect()  # as simulate's: free the simulation's tensors now
    if not gpu.ran:
        raise ValueError("nothing ran on the simulated GPU")
    return gpu


@contextlib.contextmanager
def older_objects_frozen() -> Iterator[None]:
    """While a simulation runs, the garbage collector leaves alone the objects that lived before it (``gc.freeze``):
    a notebook's modules and data (half a million objects once torch and matplotlib are loaded) are not scanned again
    at each full collection, which took a fifth of a lesson's simulated cell; the simulation's own objects are
    collected as before. Where the program has frozen objects itself, nothing changes.

    Example:
        >>> with older_objects_frozen():
        ...     gc.get_freeze_count() > 0
        True
        >>> gc.get_freeze_count()
        0
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _check_gpus(gpus: Any) -> None:
    if not (isinstance(gpus, int) and gpus in (1, 2)):
        raise ValueError(f"simulate runs on 1 or 2 simulated GPUs, not {gpus!r}")


def running_predictor() -> SimGPU | None:
    """The simulated GPU with :class:`HostCosts` that runs now (inside :func:`simulate`), or None.

    Example:
        >>> running_predictor() is None
        True
    """
    from asynclab.sim.tensors import gpu_of

    gpu = gpu_of(required=False)
    return gpu if isinstance(getattr(gpu, "costs", None), HostCosts) else None


def record_predicted(gpu: SimGPU, call: Callable[[], Any], steps: int, warmup: int,
                     annotation: str) -> dict:
    """What torch.profiler records of ``call`` inside :func:`simulate` (:func:`asynclab.gpu.record.record` there):
    ``warmup`` runs, then ``steps`` runs each in a ``record_function(annotation)`` and a ``ProfilerStep``; the
    Chrome trace document of those steps alone, the run before them kept in the simulation's own trace.

    Example:
        >>> def step():
        ...     return (torch.ones(256, 256, device="cuda") * 2).sum()
        >>> def run():
        ...     doc = record_predicted(running_predictor(), step, steps=2, warmup=1, annotation="step")
        ...     return sorted({e["name"] for e in doc["traceEvents"] if e["cat"] == "user_annotation"})
        >>> with predictor() as gpu:
        ...     run()
        ['ProfilerStep#1', 'ProfilerStep#2', 'step']
    """
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    marks = [len(rows) for rows in (gpu.ran, gpu.launches, gpu.annotations, gpu.costs.ops)]
    starts = []
    for k in range(warmup, warmup + steps):
        starts.append(gpu.host)
        with torch.profiler.record_function(annotation):
            call()
        if k == warmup + steps - 1:
            torch.cuda.synchronize()  # every kernel of the last step lands in the trace, as record() does
        gpu.annotations.append((f"ProfilerStep#{k}", starts[-1], gpu.host))
        gpu.host += gpu.ANNOTATION_MS
    rows = [rows[mark:] for rows, mark in zip((gpu.ran, gpu.launches, gpu.annotations, gpu.costs.ops), marks)]
    return document_of(*rows, _header(gpu, starts + [gpu.host], None))


def _run_steps(gpu: SimGPU, call: Callable[[], Any], steps: int | None, warmup: int) -> tuple[Any, list[float]]:
    """Run ``call`` once, or ``warmup`` times and then ``steps`` times in ProfilerStep ranges; the last result and
    when each step began (and, last, when the steps ended)."""
    if steps is None:
        gpu.forget_past()
        return call(), []
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    gpu.forget_past()
    starts, result = [], None
    for k in range(warmup, warmup + steps):
        starts.append(gpu.host)
        result = call()
        gpu.annotations.append((f"ProfilerStep#{k}", starts[-1], gpu.host))
        gpu.host += gpu.ANNOTATION_MS  # the profiler's own step()
    return result, starts + [gpu.host]


def _header(gpu: SimGPU, starts: list[float], result: Any) -> dict:
    """The trace's top-level fields: the simulated card as its device, and what :func:`simulate` records."""
    reads = gpu.costs.clock_reads
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    returned = result if number(result) or (isinstance(result, (list, tuple)) and result
                                            and all(number(v) for v in result)) else None
    name = f"{gpu.figures['meta']['card']} (simulated)"
    return {"deviceProperties": [{"id": d, "name": name, "numSms": gpu.SM_COUNT} for d in range(gpu.devices)],
            "simulated": {"card": gpu.figures["meta"]["card"], "predicted": True,
                          "calibrated": bool(gpu.figures["meta"].get("calibrated")), "values": gpu.computes,
                          "step_ms": [b - a for a, b in zip(starts, starts[1:])],
                          "clock_reads_ms": list(reads), "timed_ms": [b - a for a, b in zip(reads, reads[1:])],
                          "elapsed_ms": list(gpu.costs.elapsed),
                          "returned": list(returned) if isinstance(returned, tuple) else returned}}


def _output(path: str | os.PathLike | None) -> Path | None:
    if path is None:
        return None
    out = Path(path)
    if not (out.name.endswith(".json") or out.name.endswith(".json.gz")):
        raise ValueError(f"{out}: the trace file must end in .json.gz (or .json)")
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def save_document(doc: dict, out: Path) -> None:
    """Write a trace document to ``out`` (gzipped where its name ends in .gz): it opens in Perfetto."""
    text = json.dumps(doc)
    if out.name.endswith(".gz"):
        with gzip.open(out, "wt", compresslevel=6) as f:
            f.write(text)
    else:
        out.write_text(text)
