"""The torch.cuda stand-ins: handles made anywhere, state per simulation, PyTorch's API, clear limits."""
import subprocess
import sys
import textwrap

import pytest
import torch

import asynclab as al
from asynclab.sim.cuda import device_index
from asynclab.sim.simulation import Simulation
from asynclab.sim.limits import SimulationLimit, limit_message
from asynclab.sim.device import SimGPU

no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="the stand-ins stand in only without a GPU")


@no_gpu
def test_a_notebook_session_without_a_gpu():
    """In a fresh process, as a notebook: streams and events made in any cell, checks that reuse them."""
    code = textwrap.dedent("""
        import torch
        import asynclab as al
        side = None
        try:
            torch.cuda.Stream()
        except Exception as err:
            print("before start:", type(err).__name__)
        run = al.start(3)
        side, done = torch.cuda.Stream(), torch.cuda.Event(enable_timing=True)
        main = torch.cuda.current_stream()
        print("outside a check:", torch.cuda.is_available(), torch.cuda.device_count(), side.query(), done.query())
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            print("current is side:", torch.cuda.current_stream() is side)
        print("back:", torch.cuda.current_stream() is main)

        def lazy(work, x):  # reuses side, made in an earlier cell, and drops the first wait
            caller = torch.cuda.current_stream()
            with torch.cuda.stream(side):
                y = work(x)
            caller.wait_stream(side)
            y.record_stream(caller)
            return y
        print(al.check("03.wait_stream_fix", lazy).right, al.check("03.wait_stream_fix", lazy).right)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "before start: AcceleratorError" in lines or any(l.startswith("before start:") for l in lines)
    assert "outside a check: False 0 True True" in lines
    assert "current is side: True" in lines and "back: True" in lines
    assert "exercises: torch.cuda's streams, events and devices stand in" in out.stdout
    assert lines[-1] == "False False"


@no_gpu
def test_a_two_gpu_lesson_on_a_machine_with_one_gpu():
    """Colab's one T4 in lesson 06: the lesson's own solution, typed as printed, runs on stand-ins and is judged on two
    simulated GPUs."""
    import answers

    solution = answers.solutions(answers.notebook_of("06.overlap_copy"))[0].code
    code = textwrap.dedent("""
        import torch
        torch.cuda.is_available, torch.cuda.device_count = (lambda: True), (lambda: 1)  # a machine with one GPU
        import asynclab as al
        from asynclab.sim.install import gpus_here
        from asynclab.sim.simulation import stand_in_for_cuda
        from asynclab.sim.limits import SimulationLimit, limit_message
        print("one-GPU lesson:", stand_in_for_cuda(1))
        print("two-GPU lesson:", stand_in_for_cuda(2))
        print("outside a check:", torch.cuda.is_available(), torch.cuda.device_count())
        print(limit_message(SimulationLimit("torch.cuda.memory_allocated()"), gpus_here()))
        check = al.check
        al.check = lambda *args: print(check(*args).right, check(*args).message)
    """) + solution
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == ["one-GPU lesson: False", "two-GPU lesson: True", "outside a check: True 1"]
    assert "This machine has 1 GPU, fewer than the check needs" in lines[3]
    assert lines[-1].startswith("True ") and "this machine has 1 GPU" in lines[-1], lines[-1]


def _busy(gpu: SimGPU, ms: float) -> None:
    """Keep the current stream busy for ``ms`` (a spin kernel)."""
    torch.cuda._sleep(gpu.cycles(ms))


def test_a_stream_starts_every_simulation_idle():
    with SimGPU() as gpu:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            _busy(gpu, 30.0)
        assert gpu.ready(side) == pytest.approx(30.0, abs=0.01) and not side.query()
    with SimGPU() as gpu:
        assert gpu.ready(side) == 0.0 and side.query()
        x = torch.zeros(2, device="cuda")
        _busy(gpu, 20.0)
        x.fill_(1.0)
        with torch.cuda.stream(side):
            y = x * 2  # no wait: a reused stream orders nothing by accident
        assert y.tolist() == [0.0, 0.0]


def test_pytorch_stream_and_event_api():
    with SimGPU() as gpu:
        main, side = torch.cuda.current_stream(), torch.cuda.Stream()
        assert main is torch.cuda.default_stream() and torch.cuda.current_device() == 0
        _busy(gpu, 5.0)
        e = main.record_event()
        side.wait_event(e)
        assert gpu.ready(side) == pytest.approx(5.0, abs=0.01)
        torch.cuda.set_stream(side)
        assert torch.cuda.current_stream() is side
        torch.cuda.set_stream(main)
        with torch.cuda.StreamContext(side), torch.cuda.device(0):
            _busy(gpu, 1.0)
        assert gpu.ready(side) == pytest.approx(6.0, abs=0.01) and gpu.ready(main) == pytest.approx(5.0, abs=0.01)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True, blocking=True)
        start.record(side)
        with torch.cuda.stream(side):
            _busy(gpu, 2.0)
        end.record(side)
        with pytest.raises(RuntimeError, match="completed"):
            start.elapsed_time(end)
        end.synchronize()
        assert start.elapsed_time(end) == pytest.approx(2.0, abs=0.01) and gpu.host == pytest.approx(8.0, abs=0.05)
        e2 = torch.cuda.Event()
        e2.record()
        e2.wait(side)
        torch.cuda.synchronize()
        assert side.query() and e2.query()


@pytest.mark.skipif(not hasattr(torch, "accelerator"), reason="torch.Event and torch.accelerator need PyTorch 2.6")
def test_pytorch_device_generic_api():
    """torch.Event, torch.Stream and torch.accelerator, as a GPU's CUDA streams and events."""
    with SimGPU() as gpu:
        acc = torch.accelerator
        assert acc.is_available() and acc.device_count() == 1 and acc.current_device_index() == 0
        assert acc.current_accelerator() == torch.device("cuda") and acc.current_stream() is torch.cuda.current_stream()
        side = torch.Stream()
        start, end = torch.Event(enable_timing=True), torch.Event(device="cuda", enable_timing=True)
        start.record(side)
        acc.set_stream(side)
        _busy(gpu, 3.0)
        end.record()
        acc.set_stream(torch.cuda.default_stream())
        assert not end.query() and end.device == torch.device("cuda", 0)
        acc.synchronize()
        assert start.elapsed_time(end) == pytest.approx(3.0, abs=0.01) and gpu.host == pytest.approx(3.0, abs=0.05)


def test_pinned_host_memory_shows_a_copy_when_it_lands():
    """numpy() shares a host tensor's memory, as on a GPU's host: a copy shows in it when it lands; np.array copies."""
    import numpy as np

    with SimGPU() as gpu:
        out = torch.full((2,), -1.0).pin_memory()
        view = out.numpy()
        src = torch.tensor([5.0, 6.0], device="cuda")
        _busy(gpu, 5.0)
        out.copy_(src, non_blocking=True)
        snapshot, shared = np.array(out), np.asarray(out)
        assert view.tolist() == [-1.0, -1.0] and snapshot.tolist() == [-1.0, -1.0]
        torch.cuda.synchronize()
        assert view.tolist() == [5.0, 6.0] and shared.tolist() == [5.0, 6.0] and snapshot.tolist() == [-1.0, -1.0]
        with pytest.raises(TypeError, match="cpu"):
            src.numpy()


def test_the_sync_debug_mode_reports_what_waits_for_the_gpu():
    import warnings

    with SimGPU() as gpu, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x = torch.ones(3, device="cuda")
        torch.cuda.set_sync_debug_mode("warn")
        assert torch.cuda.get_sync_debug_mode() == 1
        y = (x * 2).sum()  # queued: no wait
        assert not seen
        y.item(), x[x > 0], torch.tensor([1.0], device="cuda")  # a read, a mask (nonzero), a blocking copy
        torch.cuda.set_sync_debug_mode("error")
        with pytest.raises(RuntimeError, match="synchronizing"):
            x.tolist()
        torch.cuda.set_sync_debug_mode(0)
    assert [str(w.message) for w in seen] == ["called a synchronizing CUDA operation"] * 3


def test_devices_and_limits():
    assert device_index(torch.device("cuda", 1)) == 1 and device_index("cuda", current=1) == 1
    with pytest.raises(SimulationLimit, match="'cuda:0' and 'cuda:1'"):
        device_index("mps")
    with SimGPU():
        with pytest.raises(SimulationLimit, match="GPU 1"):
            torch.cuda.Stream(1)
        with pytest.raises(SimulationLimit, match="stream.device_type"):  # a name every PyTorch's stream has
            torch.cuda.current_stream().device_type
        assert torch.cuda.Stream.priority_range() == (0, -3)  # as on an NVIDIA H100
        with torch.cuda.stream(torch.cuda.Stream()) as entered:
            assert entered is None  # torch.cuda.StreamContext.__enter__ returns nothing
    with SimGPU(devices=2) as sim:
        s1 = torch.cuda.Stream(device="cuda:1")
        assert s1.device == torch.device("cuda", 1) and torch.cuda.device_count() == 2
        with torch.cuda.stream(s1):
            assert torch.cuda.current_device() == 1 and torch.cuda.current_stream(1) is s1
        assert torch.cuda.current_device() == 0 and torch.cuda.current_stream(1) is not s1
        torch.cuda.set_device(1)
        assert sim.device == 1


def test_a_typo_on_a_stand_in_raises_what_the_real_class_raises():
    """A name the real Stream, Event or CUDAGraph lacks is the learner's typo: the AttributeError a GPU raises, word for
    word. A name they have and the stand-in lacks is a limit of ours."""
    with SimGPU():
        event, side, graph = torch.cuda.Event(), torch.cuda.Stream(), torch.cuda.CUDAGraph()
        for obj, typo, real in ((event, "synchronise", "Event"), (side, "wait_steam", "Stream"),
                                (graph, "replayy", "CUDAGraph")):
            with pytest.raises(AttributeError, match=f"^'{real}' object has no attribute '{typo}'$"):
                getattr(obj, typo)
        with pytest.raises(SimulationLimit, match="does not cover event.ipc_handle"):
            event.ipc_handle()


def test_limit_messages_name_the_call():
    assert "does not cover tensor.foo" in limit_message(SimulationLimit("tensor.foo"))
    assert limit_message(ValueError("no")) is None

    def learner():
        raise RuntimeError("Found no NVIDIA driver on your system.")

    try:
        learner()
    except RuntimeError as err:
        message = limit_message(err)
    assert 'raise RuntimeError("Found no NVIDIA driver' in message and "simulation's limit" in message
    assert "simulation's limit" in str(al.checks.raised(SimulationLimit("x")))


def test_simulations_put_torch_cuda_back():
    from asynclab.sim import cuda as simcuda
    from asynclab.sim.install import outside

    with outside():  # as in a process where no notebook session put the stand-ins in place
        before, generic = torch.cuda.Stream, (torch.Stream, getattr(torch, "accelerator", None))
        waits = vars(generic[1]).get("synchronize") if generic[1] else None
        with Simulation():
            assert torch.cuda.is_available() and torch.cuda.Stream is simcuda.Stream and torch.Stream is simcuda.Stream
        assert torch.cuda.Stream is before and torch.Stream is generic[0]
        assert waits is None or torch.accelerator.synchronize is waits


def test_the_session_keeps_the_current_stream_and_an_events_device():
    with SimGPU():
        side = torch.cuda.Stream()
        torch.cuda.set_stream(side)  # never put back
    with SimGPU():
        assert torch.cuda.current_stream() is side  # as a real process keeps it
        torch.cuda.set_stream(torch.cuda.default_stream())
    with SimGPU(devices=2):
        done = torch.cuda.Event()
        done.record(torch.cuda.Stream(0))
        with pytest.raises(RuntimeError, match="Event device 0 does not match recording stream's device 1"):
            done.record(torch.cuda.Stream(1))
        with pytest.raises(RuntimeError, match="invalid argument"):
            torch.cuda.Event(enable_timing=True, interprocess=True).record()


def test_each_thread_has_its_own_current_stream_and_device():
    """As CUDA keeps them: a thread starts on GPU 0's default stream, whatever the thread that started it set."""
    import threading

    seen = {}

    def worker():
        seen["start"] = (torch.cuda.current_device(), torch.cuda.current_stream() is torch.cuda.default_stream(0))
        torch.cuda.set_stream(torch.cuda.Stream(1))  # never put back, in this thread only

    with SimGPU(devices=2):
        side = torch.cuda.Stream(1)
        with torch.cuda.stream(side):
            t = threading.Thread(target=worker)
            t.start()
            t.join()
            assert torch.cuda.current_stream() is side and torch.cuda.current_device() == 1
    assert seen["start"] == (0, True)


def test_sleeping_moves_the_simulated_host_on():
    import time
    import timeit

    with SimGPU() as sim:
        x = torch.empty(0, device="cuda")
        start = sim.host
        time.sleep(0.05)
        assert sim.host - start == pytest.approx(50.0) and repr(x) == "tensor([], device='cuda:0')"
    assert time.sleep is not sim.sleep
    real, real_timer = time.perf_counter, timeit.default_timer
    with SimGPU() as sim:  # a busy-wait on the host's clocks moves it on too: each reading costs a step
        start, start_ns, cpu = time.perf_counter(), time.monotonic_ns(), time.process_time()
        while timeit.default_timer() - start < 0.03:
            pass
        time.sleep(0.01)  # asleep: the CPU-time clocks stand still
        assert 40.0 <= sim.host < 40.1 and isinstance(time.monotonic_ns(), int)
        assert 40e6 <= time.monotonic_ns() - start_ns < 40.1e6 and 0.03 <= time.process_time() - cpu < 0.0301
        kept = time.perf_counter
    assert time.perf_counter is real and timeit.default_timer is real_timer
    assert abs(kept() - real()) < 1.0  # a stand-in kept past its check reads the real clock


def test_a_daemon_thread_keeps_the_real_clock_during_a_check():
    """A notebook kernel's own threads (daemons, started before the check) sleep and read clocks while a check runs:
    they do not move the simulated host on, while the check's own thread does."""
    import threading
    import time

    from asynclab.sim.device import SimGPU

    go, done = threading.Event(), threading.Event()

    def kernel_thread():
        go.wait()
        for _ in range(5):
            time.sleep(0.01)
            time.monotonic()
        done.set()

    worker = threading.Thread(target=kernel_thread, daemon=True)
    worker.start()
    with SimGPU() as gpu:
        go.set()
        done.wait()
        assert gpu.host < 1.0
        time.sleep(0.5)
        assert gpu.host >= 500.0
    worker.join()


def test_each_host_thread_started_in_a_check_has_its_own_clock():
    """Threads run side by side: one that waits for the GPU (or sleeps) does not hold up the check's thread, which
    catches up with it only when it joins it. A thread starts at its starter's time and launches at its own."""
    import threading
    import time

    from asynclab.sim.device import SimGPU

    with SimGPU() as gpu:
        _busy(gpu, 20.0)
        done = torch.cuda.current_stream().record_event()
        seen = {}

        def waiter():
            seen["start"] = gpu.host
            done.synchronize()  # blocks this thread until the spin ends...
            seen["woke"] = gpu.host
            time.sleep(0.005)

        worker = threading.Thread(target=waiter, daemon=True)
        worker.start()
        while worker.is_alive():
            time.sleep(0)  # the real thread finishes; the simulated host thread only moves its own clock
        assert gpu.host < 1.0 and not done.query()  # ...not the check's thread, which went on
        assert seen["start"] < 1.0 and seen["woke"] >= 20.0
        worker.join()
        assert gpu.host == pytest.approx(25.0, abs=0.1) and done.query()



def test_a_thread_woken_by_a_notify_holds_the_others_back_before_it_runs():
    """A thread waiting on a condition holds no one back; once notified it does, at once, even before the operating
    system runs it (as ``Thread.start()`` is woken by the new thread, which may then wait for the GPU)."""
    import threading
    import time

    from asynclab.sim.device import SimGPU

    with SimGPU() as gpu:
        cond, ready = threading.Condition(), threading.Event()

        def waiter():
            with cond:
                ready.set()
                cond.wait()

        worker = threading.Thread(target=waiter, daemon=True)
        worker.start()
        ready.wait()
        time.sleep(0.05)  # the check's thread moves 50 ms on; the waiter's clock stays where it started
        with cond:  # the waiter cannot return from its wait while this thread holds the lock
            assert gpu.threads.horizon == pytest.approx(gpu.host)
            cond.notify()
            assert gpu.threads.horizon < gpu.host - 40.0
        worker.join()


def test_a_thread_waiting_for_another_process_holds_no_one_back():
    """A thread waiting on a connection to another process (a DataLoader's pinning thread, in its workers' queue's
    ``get``) holds no one back: the check's thread that moves on does not wait for it to catch up."""
    import multiprocessing
    import threading
    import time

    from asynclab.sim.device import SimGPU

    with SimGPU() as gpu:
        theirs, ours = multiprocessing.Pipe()
        ready = threading.Event()

        def waiter():
            ready.set()
            theirs.poll(60)  # until the check's thread sends

        worker = threading.Thread(target=waiter, daemon=True)
        worker.start()
        ready.wait()
        time.sleep(0.05)  # the check's thread moves 50 ms on; the waiter's clock stays where it started
        for _ in range(2000):  # (real seconds: until the waiter is in its poll)
            if gpu.threads.horizon == pytest.approx(gpu.host):
                break
            threading.Event().wait(0.001)
        assert gpu.threads.horizon == pytest.approx(gpu.host)
        ours.send(1)
        worker.join()


def test_a_wrong_argument_fails_as_it_does_on_a_gpu():
    from asynclab.grading.backend import backend

    with backend(1):
        side = torch.cuda.Stream()
        with pytest.raises(AttributeError, match="'function' object has no attribute 'record_event'"):
            side.wait_stream(torch.cuda.current_stream)  # the call's parentheses forgotten
        with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'wait'"):
            side.wait_event(None)
        with pytest.raises(TypeError, match="incompatible function arguments"):
            torch.cuda.Event().record(5)


def _reach(fn):
    """Call ``fn`` as learner code does, from a line of this file: what it returned or raised."""
    try:
        return fn(), None
    except Exception as err:  # noqa: BLE001 - every outcome is sorted below
        return None, err


def _fair(err: Exception | None, line: str) -> bool:
    """What a learner gets is fair: no error, the real signature's own TypeError, or a limit of ours naming their line."""
    if err is None or isinstance(err, TypeError) and "argument" in str(err):
        return True
    message = limit_message(err)
    return message is not None and line in message


def test_every_public_name_of_torch_cuda_is_stood_in_or_refused_with_the_learners_line():
    """Sweep: each public function of torch.cuda, called in a simulation (with no arguments, as a first try), returns,
    raises the TypeError its signature raises on a GPU, or is refused as a limit that names the learner's line; each
    public name of torch.cuda's Stream and Event is on the stand-in or refused as a limit; ExternalStream is refused."""
    import inspect

    unfair = []
    with SimGPU():
        for name in sorted(n for n in dir(torch.cuda) if not n.startswith("_")):
            fn = getattr(torch.cuda, name)
            if not inspect.isfunction(fn) or name in ("lru_cache", "classproperty", "cast"):  # helpers it imports
                continue
            _, err = _reach(fn)
            if not _fair(err, "return fn(), None"):
                unfair.append(f"torch.cuda.{name}: {type(err).__name__}: {err}")
        stand_ins = {torch.cuda.streams.Stream: torch.cuda.Stream(), torch.cuda.streams.Event: torch.cuda.Event()}
        for real, obj in stand_ins.items():
            for name in sorted(n for n in dir(real) if not n.startswith("_")):
                _, err = _reach(lambda: getattr(obj, name))
                if err is not None and not isinstance(err, SimulationLimit):
                    unfair.append(f"{real.__name__}.{name}: {type(err).__name__}: {err}")
        if not torch.cuda.is_available():
            _, err = _reach(lambda: torch.cuda.ExternalStream(0))
            if not _fair(err, "_reach(lambda: torch.cuda.ExternalStream(0))"):
                unfair.append(f"ExternalStream(0): {type(err).__name__}: {err}")
    assert not unfair, "\n".join(unfair)
    assert "device_of" in dir(torch.cuda) and "Stream" in dir(torch.cuda)  # the sweep saw the names it must
