"""Hand-offs between host threads in a simulation: what one thread passes another carries the sender's time.

A simulated host thread keeps a clock of its own (see :mod:`asynclab.sim.hostthreads`). When it hands a
result to another thread, the receiver goes on no earlier than the sender's time at the hand-off, as on a real
machine. Python hands results across threads in many ways; each stand-in here covers one:

- ``queue.Queue.put`` and ``get`` (and so ``LifoQueue`` and ``PriorityQueue``): the item carries its ``put`` time;
- ``queue.SimpleQueue`` (a thread pool's work queue): the same, and a thread blocked in its ``get`` holds no one back;
- ``concurrent.futures.Future``: ``result()`` and ``exception()`` go on from the time the result was set;
- ``asyncio``'s ``call_soon_threadsafe`` (under ``to_thread``, ``run_in_executor`` and ``wrap_future``): the
  callback runs in the loop's thread no earlier than the time it was handed over;
- an event loop waiting in its selector holds no one back;
- a thread waiting for another process (``multiprocessing.connection.wait``, under a multiprocessing queue's ``get``:
  a DataLoader's pinning thread waiting for its workers' batches) holds no one back: that process is outside the
  simulation, and the others need not wait for what it sends.

A ``threading.Condition`` (under ``threading.Event`` and the queues), ``Thread.join`` and ``time.sleep`` (a
polling loop) are covered where the simulation keeps its clocks.

Example:
    >>> import queue, threading, torch
    >>> from asynclab.sim.device import SimGPU
    >>> with SimGPU() as gpu:
    ...     q = queue.Queue()
    ...     worker = threading.Thread(target=lambda: (torch.cuda._sleep(10_000_000), torch.cuda.synchronize(),
    ...                                               q.put("done")))
    ...     worker.start()
    ...     got, waited = q.get(), gpu.host > 5.0    # the worker's 10M cycles: several ms of the host's time
    ...     worker.join()
    >>> got, waited
    ('done', True)
"""
from __future__ import annotations

import heapq
import queue
import threading
import weakref
from typing import Any, Callable

from asynclab.sim import patches
from asynclab.sim.tensors import gpu_of

__all__ = ["install"]

_LOCK = threading.Lock()


def _sent() -> float | None:
    """The calling thread's time, where it is part of the simulated host program; else None."""
    gpu = gpu_of(required=False)
    return gpu.threads.handed_from() if gpu is not None else None


def _received(t: float | None) -> None:
    """The calling thread received what another handed over at ``t``: it goes on no earlier."""
    gpu = gpu_of(required=False)
    if gpu is not None and t is not None:
        gpu.threads.handed_to(t)


class _Times:
    """The hand-off times of the items in each queue, earliest first (items leave a FIFO queue in that order)."""

    def __init__(self) -> None:
        self._times: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def put(self, owner: Any, t: float | None) -> None:
        if t is not None:
            with _LOCK:
                heapq.heappush(self._times.setdefault(owner, []), t)

    def take(self, owner: Any) -> float | None:
        with _LOCK:
            heap = self._times.get(owner)
            return heapq.heappop(heap) if heap else None


def _queues(put: Callable, get: Callable) -> dict[str, Callable]:
    """``queue.Queue.put`` and ``get``: the item's ``put`` time goes with it (the wait itself is a Condition's)."""
    times = _Times()

    def timed_put(q: queue.Queue, item: Any, block: bool = True, timeout: float | None = None) -> None:
        t = _sent()
        put(q, item, block, timeout)
        times.put(q, t)

    def timed_get(q: queue.Queue, block: bool = True, timeout: float | None = None) -> Any:
        item = get(q, block, timeout)
        _received(times.take(q))
        return item
    return {"put": timed_put, "get": timed_get}


def _simple_queue(base: type) -> type:
    """A ``queue.SimpleQueue`` whose items carry their ``put`` time, and whose ``get`` is a blocked thread's."""
    times = _Times()

    class SimpleQueue(base):  # type: ignore[misc, valid-type]
        __doc__ = base.__doc__

        def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
            t = _sent()
            times.put(self, t)
            super().put(item, block, timeout)

        def put_nowait(self, item: Any) -> None:
            self.put(item, False)

        def get(self, block: bool = True, timeout: float | None = None) -> Any:
            gpu = gpu_of(required=False)
            if gpu is None:
                return super().get(block, timeout)
            with gpu.threads.blocked():
                item = super().get(block, timeout)
            _received(times.take(self))
            return item

        def get_nowait(self) -> Any:
            return self.get(False)
    SimpleQueue.__module__ = base.__module__
    return SimpleQueue


def _futures(set_result: Callable, set_exception: Callable, result: Callable,
             exception: Callable) -> dict[str, Callable]:
    """``concurrent.futures.Future``: reading its outcome goes on from the time it was set."""
    times: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def timed_set_result(fut: Any, value: Any) -> None:
        t = _sent()
        if t is not None:
            times[fut] = t
        set_result(fut, value)

    def timed_set_exception(fut: Any, error: BaseException | None) -> None:
        t = _sent()
        if t is not None:
            times[fut] = t
        set_exception(fut, error)

    def timed_result(fut: Any, timeout: float | None = None) -> Any:
        try:
            return result(fut, timeout)
        finally:
            _received(times.get(fut))

    def timed_exception(fut: Any, timeout: float | None = None) -> BaseException | None:
        try:
            return exception(fut, timeout)
        finally:
            _received(times.get(fut))
    return {"set_result": timed_set_result, "set_exception": timed_set_exception, "result": timed_result,
            "exception": timed_exception}


def _event_loop(call_soon_threadsafe: Callable) -> dict[str, Callable]:
    """``call_soon_threadsafe``: the callback runs in the loop's thread no earlier than it was handed over."""
    def timed_call_soon_threadsafe(loop: Any, callback: Callable, *args: Any, context: Any = None) -> Any:
        t = _sent()
        if t is None:
            return call_soon_threadsafe(loop, callback, *args, context=context)

        def handed(*a: Any) -> Any:
            _received(t)
            return callback(*a)
        return call_soon_threadsafe(loop, handed, *args, context=context)
    return {"call_soon_threadsafe": timed_call_soon_threadsafe}


def _selector(select: Callable) -> dict[str, Callable]:
    """An event loop's ``select``: the loop's thread, waiting there for another's hand-off, holds no one back."""
    def blocked_select(selector: Any, timeout: float | None = None) -> Any:
        gpu = gpu_of(required=False)
        if gpu is None or timeout is not None and timeout <= 0:
            return select(selector, timeout)
        with gpu.threads.blocked():
            return select(selector, timeout)
    return {"select": blocked_select}


def _connection_wait(wait: Callable) -> dict[str, Callable]:
    """``multiprocessing.connection.wait``: a thread waiting there for another process holds no one back."""
    def blocked_wait(object_list: Any, timeout: float | None = None) -> Any:
        gpu = gpu_of(required=False)
        if gpu is None or timeout is not None and timeout <= 0:
            return wait(object_list, timeout)
        with gpu.threads.blocked():
            return wait(object_list, timeout)
    return {"wait": blocked_wait}


def install() -> list[patches.Installed]:
    """Put every hand-off stand-in in place; undo each returned :class:`~asynclab.sim.patches.Installed` after.

    Example:
        >>> import queue
        >>> done = install()
        >>> queue.SimpleQueue.__name__, [d.undo() for d in done] and queue.SimpleQueue.__module__
        ('SimpleQueue', '_queue')
    """
    import asyncio
    import concurrent.futures
    import multiprocessing.connection
    import selectors

    fut = concurrent.futures.Future
    done = [patches.install("queue.Queue", _queues(queue.Queue.put, queue.Queue.get)),
            patches.install("queue", {"SimpleQueue": _simple_queue(queue.SimpleQueue)}),
            patches.install("concurrent.futures.Future", _futures(fut.set_result, fut.set_exception, fut.result,
                                                                   fut.exception)),
            patches.install("asyncio.BaseEventLoop", _event_loop(asyncio.BaseEventLoop.call_soon_threadsafe)),
            patches.install("selectors.DefaultSelector", _selector(selectors.DefaultSelector.select)),
            patches.install("multiprocessing.connection", _connection_wait(multiprocessing.connection.wait))]
    return done
