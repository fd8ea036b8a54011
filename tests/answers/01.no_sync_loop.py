# Learner answers to lesson 01's exercise 3 (01.no_sync_loop): fast_loop(losses) sums the per-step losses
# with at most one host read. Each cell is run after the notebook's set-up; see tests/answers.py for the format.

# %% right: a running sum on the device, one .item() at the end
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: torch.stack, then sum, then .item()
def fast_loop(losses):
    return torch.stack(losses).sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% right: float() of the stacked sum
def fast_loop(losses):
    total = torch.stack(losses).sum()
    return float(total)

al.check("01.no_sync_loop", fast_loop)

# %% right: Python's sum over the tensors, read once
def fast_loop(losses):
    return sum(losses).item()

al.check("01.no_sync_loop", fast_loop)

# %% right: torch.sum(torch.stack(...)), then .item()
def fast_loop(losses):
    stacked = torch.stack(losses)
    return torch.sum(stacked).item()

al.check("01.no_sync_loop", fast_loop)

# %% right: keep every loss for logging, read them all at once with .tolist()
def fast_loop(losses):
    history = torch.stack([loss.detach() for loss in losses])  # stays on the device
    logged = history.tolist()  # one read, after the loop
    return sum(logged)

al.check("01.no_sync_loop", fast_loop)

# %% right: .tolist() of a 0-dim tensor gives one Python float
def fast_loop(losses):
    total = losses[0].clone()
    for loss in losses[1:]:
        total = total + loss
    return total.tolist()

al.check("01.no_sync_loop", fast_loop)

# %% right: zeros_like and in-place add_, float() at the end
def fast_loop(losses):
    total = torch.zeros_like(losses[0])
    for loss in losses:
        total.add_(loss.detach())
    return float(total)

al.check("01.no_sync_loop", fast_loop)

# %% right: running sum started from None, under no_grad
def fast_loop(losses):
    total = None
    with torch.no_grad():
        for loss in losses:
            total = loss if total is None else total + loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: functools.reduce with torch.add
import functools

def fast_loop(losses):
    return functools.reduce(torch.add, losses).item()

al.check("01.no_sync_loop", fast_loop)

# %% right: a float64 accumulator made with new_zeros, on the losses' device
def fast_loop(losses):
    total = losses[0].new_zeros((), dtype=torch.float64)
    for loss in losses:
        total += loss.double()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: cat of reshaped losses, then sum
def fast_loop(losses):
    return torch.cat([loss.reshape(1) for loss in losses]).sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% right: logs once, after the loop, from the one value it read
def fast_loop(losses):
    total = torch.stack(losses).sum()
    value = total.item()
    print(f"total loss {value:.4f}")
    return value

al.check("01.no_sync_loop", fast_loop)

# %% right: copies the total to the host with .cpu() once, then reads it
def fast_loop(losses):
    return torch.stack(losses).sum().cpu().item()

al.check("01.no_sync_loop", fast_loop)

# %% right: an accumulator made on "cuda" by name
def fast_loop(losses):
    total = torch.zeros((), device="cuda")
    for loss in losses:
        total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "50 host reads": the slow loop itself, .item() every step
def slow_loop(losses):
    total = 0.0
    for loss in losses:
        total += loss.item()  # a sync every step
    return total

def fast_loop(losses):
    return slow_loop(losses)

al.check("01.no_sync_loop", fast_loop)

# %% wrong "50 host reads": float() every step
def fast_loop(losses):
    return sum(float(loss) for loss in losses)

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": a device sum, but an f-string log every step
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for step, loss in enumerate(losses):
        total += loss
        print(f"step {step}: loss {loss:.4f}")
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": .cpu() every step
def fast_loop(losses):
    total = torch.zeros(())
    for loss in losses:
        total += loss.cpu()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "50 host reads": .tolist() every step
def fast_loop(losses):
    total = 0.0
    for loss in losses:
        total += loss.tolist()
    return total

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": skips zero losses with an if on a tensor every step
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        if loss > 0:
            total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": masked_select every step to drop zero losses
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += torch.masked_select(loss, loss > 0).sum()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": a boolean mask every step (it needs nonzero's size on the host)
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss[loss > 0].sum()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": torch.nonzero every step
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        if torch.nonzero(loss.reshape(1)).numel():
            total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "6 host reads": logs with .item() every 10 steps (and reads the total)
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for step, loss in enumerate(losses):
        total += loss
        if step % 10 == 0:
            print(f"step {step}: {loss.item():.4f}")
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "2 host reads": reads the total twice, once to print and once to return
def fast_loop(losses):
    total = torch.stack(losses).sum()
    print("total", total.item())
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": the read is inside the loop (indented one level too far)
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss
        return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "return a Python number": returns the tensor, never read
def fast_loop(losses):
    return torch.stack(losses).sum()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": the mean, not the sum
def fast_loop(losses):
    return torch.stack(losses).mean().item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": = instead of +=, so it keeps only the last loss
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total = loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": torch.tensor(losses) reads every loss to build a new tensor
def fast_loop(losses):
    return torch.tensor(losses).sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": print(loss) every step (printing a tensor reads it)
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss
        print(loss)
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": returns a one-element list
def fast_loop(losses):
    return torch.stack(losses).sum().reshape(1).tolist()

al.check("01.no_sync_loop", fast_loop)

# %% right: a small meter class that keeps the running sum on the device
class LossMeter:
    def __init__(self):
        self.total = None

    def update(self, loss):
        loss = loss.detach()
        self.total = loss if self.total is None else self.total + loss

    def value(self):
        return self.total.item()

def fast_loop(losses):
    meter = LossMeter()
    for loss in losses:
        meter.update(loss)
    return meter.value()

al.check("01.no_sync_loop", fast_loop)

# %% right: to(torch.device("cpu"), dtype=float64) once, then numpy's item on the host copy
def fast_loop(losses):
    total = torch.stack(losses).sum()
    host = total.to(torch.device("cpu"), dtype=torch.float64)  # one D2H copy (a sync)
    return host.numpy().item()  # a host tensor: no further sync

al.check("01.no_sync_loop", fast_loop)

# %% right: math.fsum over one tolist() of the stacked losses
import math

def fast_loop(losses):
    return math.fsum(torch.stack(losses).tolist())

al.check("01.no_sync_loop", fast_loop)

# %% right: torch.add with out= into a preallocated accumulator, closure keeps it
def make_loop():
    def fast_loop(losses):
        acc = torch.zeros_like(losses[0])
        for loss in losses:
            torch.add(acc, loss, out=acc)
        return float(acc)
    return fast_loop

al.check("01.no_sync_loop", make_loop())

# %% wrong "host reads": a per-step stream synchronize (set_sync_debug_mode reports every one on a GPU)
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss
        torch.cuda.current_stream().synchronize()  # "make sure the step is done"
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "2 host reads": a NaN guard on the total before reading it
def fast_loop(losses):
    total = torch.stack(losses).sum()
    if torch.isnan(total):
        raise ValueError("nan loss")
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": gaming: reads every loss with torch function handling switched off
def fast_loop(losses):
    total = 0.0
    with torch._C.DisableTorchFunctionSubclass():
        for loss in losses:
            total += loss.item()  # still 50 syncs on a GPU
    return total

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": gaming: strips the tensor subclass before each .item()
def fast_loop(losses):
    return sum(torch.Tensor.as_subclass(loss, torch.Tensor).item() for loss in losses)

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": gaming: empties the checker's list of host reads, then reads every step
def fast_loop(losses):
    import asynclab.lessons.async_dispatch.exercises as ex
    ex.HOST_READS = frozenset()
    return sum(loss.item() for loss in losses)

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": prints "Right:" and returns the slow loop's answer
def fast_loop(losses):
    print("Right: one read at the end")
    return sum(loss.item() for loss in losses)

al.check("01.no_sync_loop", fast_loop)

# %% right: gaming: reads the checker's expected total off its stack frame (passes on a GPU too)
import inspect

def fast_loop(losses):
    frame = inspect.currentframe()
    while frame is not None and "expected" not in frame.f_locals:
        frame = frame.f_back
    return frame.f_locals["expected"]

al.check("01.no_sync_loop", fast_loop)

# %% right: one copy of the stacked losses to the host, then float() of each host element
def fast_loop(losses):
    on_host = torch.stack(losses).cpu()  # the one read: a blocking copy to the host
    return sum(float(v) for v in on_host)  # host tensors from here on: nothing to wait for

al.check("01.no_sync_loop", fast_loop)

# %% right: non_blocking copies to the host every step, one synchronize, then reads of host memory
def fast_loop(losses):
    copies = [loss.to("cpu", non_blocking=True) for loss in losses]  # async D2H into pinned memory: no wait
    torch.cuda.synchronize()  # one wait, for all of the copies
    return sum(c.item() for c in copies)  # host tensors: no sync

al.check("01.no_sync_loop", fast_loop)

# %% right: moves each loss to the accumulator's device and dtype (a no-op move on the GPU)
def fast_loop(losses):
    device = losses[0].device
    total = torch.zeros((), device=device, dtype=torch.float64)
    for loss in losses:
        total += loss.to(device, torch.float64)
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: takes the per-step .item() path only for CPU tensors (where it costs no sync)
def fast_loop(losses):
    if not losses[0].is_cuda:  # on the CPU .item() waits for nothing
        return sum(loss.item() for loss in losses)
    return torch.stack(losses).sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% right: branches on torch.cuda.is_available(), the slow loop kept for CPU-only machines
def fast_loop(losses):
    if torch.cuda.is_available():
        total = torch.zeros((), device="cuda")
        for loss in losses:
            total += loss
        return total.item()
    return sum(loss.item() for loss in losses)

al.check("01.no_sync_loop", fast_loop)

# %% right: torch.where keeps zero losses out without an if on a tensor
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += torch.where(loss > 0, loss, torch.zeros_like(loss))
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: functools.partial over a generic reducer
import functools

def _reduce_then_read(losses, reduce):
    return reduce(torch.stack(losses)).item()

fast_loop = functools.partial(_reduce_then_read, reduce=torch.sum)
al.check("01.no_sync_loop", fast_loop)

# %% right: a generator of detached losses, stacked under inference_mode
def detached(losses):
    for loss in losses:
        yield loss.detach()

def fast_loop(losses):
    with torch.inference_mode():
        total = torch.stack(list(detached(losses))).sum()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: a lambda
fast_loop = lambda losses: torch.stack(losses).sum(dtype=torch.float64).item()
al.check("01.no_sync_loop", fast_loop)

# %% right: a callable class, cumsum and the last element read once
class FastLoop:
    def __call__(self, losses):
        running = torch.stack(losses).cumsum(0)  # the running total after every step, on the device
        return running[-1].item()

fast_loop = FastLoop()
al.check("01.no_sync_loop", fast_loop)

# %% right: a CPU 0-dim start value, added out of place (a 0-dim CPU tensor is a scalar to a CUDA op)
def fast_loop(losses):
    total = torch.tensor(0.0)
    for loss in losses:
        total = total + loss  # the result is on the losses' device
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: torch.cuda.synchronize() before the one read (the device sync is not a second read of a value)
def fast_loop(losses):
    total = torch.stack(losses).sum()
    torch.cuda.synchronize()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: an event marks the end of the loop; the host waits on it once, then reads
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total.add_(loss)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: a non_blocking copy of the total, a synchronize, then the host copy's item()
def fast_loop(losses):
    host = torch.stack(losses).sum().to("cpu", non_blocking=True)
    torch.cuda.synchronize()  # the copy has landed
    return host.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "50 host reads": torch.accelerator.synchronize() every step
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss
        torch.accelerator.synchronize()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: torch.cuda.synchronize captured at the top of the cell, called every step (the check counts the patched name only)
sync = torch.cuda.synchronize

def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss
        sync()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: moves every loss to the GPU with .cuda() first (a no-op on a GPU)
def fast_loop(losses):
    losses = [loss.cuda() for loss in losses]
    return torch.stack(losses).sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% raises "can't convert cuda:0 device type tensor to numpy": .numpy() straight off a GPU tensor
def fast_loop(losses):
    return torch.stack(losses).sum().numpy().item()

al.check("01.no_sync_loop", fast_loop)

# %% raises "Expected all tensors to be on the same device": a CPU accumulator added to in place
def fast_loop(losses):
    total = torch.tensor(0.0)
    for loss in losses:
        total += loss  # in place into a CPU tensor
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: the current stream synchronized before the one read (each wait counted once)
def fast_loop(losses):
    total = torch.stack(losses).sum()
    torch.cuda.current_stream().synchronize()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": torch.cuda.synchronize() every step "so the loop does not run ahead"
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss
        torch.cuda.synchronize()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": an event recorded and waited for every step
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    step_done = torch.cuda.Event()
    for loss in losses:
        total += loss
        step_done.record()
        step_done.synchronize()
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": sorts the losses first to add small ones first (every comparison is read on the host)
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device, dtype=torch.float64)
    for loss in sorted(losses):
        total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": a finite-loss assert every step
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        assert torch.isfinite(loss), "bad loss"
        total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": skips NaN steps with .any() in an if
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        if torch.isnan(loss).any():
            continue
        total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": a meter class that logs the running mean with .item() every step
class Meter:
    def __init__(self):
        self.total, self.count, self.log = None, 0, []

    def update(self, loss):
        self.total = loss.detach() if self.total is None else self.total + loss.detach()
        self.count += 1
        self.log.append(self.total.item() / self.count)

def fast_loop(losses):
    meter = Meter()
    for loss in losses:
        meter.update(loss)
    return meter.log[-1] * meter.count

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": returns numpy's float32 (not a Python number)
def fast_loop(losses):
    return torch.stack(losses).cpu().numpy().sum()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": int() of the total
def fast_loop(losses):
    return int(torch.stack(losses).sum())

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": gaming: switches the sync debug mode off, then reads every step
def fast_loop(losses):
    torch.cuda.set_sync_debug_mode(0)
    return sum(loss.item() for loss in losses)

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": gaming: silences warnings, then reads every step
import warnings

def fast_loop(losses):
    warnings.simplefilter("ignore")
    return sum(float(loss) for loss in losses)

al.check("01.no_sync_loop", fast_loop)

# %% wrong "host reads": gaming: prints a right verdict, and reads every step with tolist()
def fast_loop(losses):
    print("Right: one read at the end: the host can run ahead for the whole loop.")
    return sum(loss.tolist() for loss in losses)

al.check("01.no_sync_loop", fast_loop)

# %% wrong "2 host reads": the accumulator made with torch.tensor(0.0, device=...) (a blocking copy from the host, reported as a sync)
def fast_loop(losses):
    total = torch.tensor(0.0, device=losses[0].device)
    for loss in losses:
        total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "2 host reads": the accumulator made with new_tensor (a blocking copy from the host, reported as a sync)
def fast_loop(losses):
    total = losses[0].new_tensor(0.0)
    for loss in losses:
        total = total + loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "2 host reads": a CPU zero moved with .to(losses[0]) (a blocking copy to the GPU, reported as a sync)
def fast_loop(losses):
    total = torch.zeros(()).to(losses[0])
    for loss in losses:
        total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: the accumulator's device from get_device() (the GPU's index)
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].get_device())
    for loss in losses:
        total += loss
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": a NaN, read once (a NaN compares false with everything, so it must not pass)
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss
    return (total * float("nan")).item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": an overflow to inf, read once
def fast_loop(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total += loss * 1e39
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "the total should be": a bool, read once
def fast_loop(losses):
    return bool(torch.stack(losses).sum() > 0)

al.check("01.no_sync_loop", fast_loop)

# %% right: Python's sum over the tensors (stays on the GPU), one .item()
def fast_loop(losses):
    return sum(losses).item()

al.check("01.no_sync_loop", fast_loop)

# %% right: torch.stack, then float() once
def fast_loop(losses):
    return float(torch.stack(list(losses)).sum())

al.check("01.no_sync_loop", fast_loop)

# %% right: accumulated in float64 on the GPU, read once
def fast_loop(losses):
    acc = torch.zeros((), dtype=torch.float64, device=losses[0].device)
    for l in losses:
        acc += l
    return acc.item()

al.check("01.no_sync_loop", fast_loop)

# %% right: one .tolist() of the stacked losses, summed on the host
def fast_loop(losses):
    return sum(torch.stack(losses).tolist())

al.check("01.no_sync_loop", fast_loop)

# %% wrong: int() of the total (the total is not a whole number)
def fast_loop(losses):
    return int(torch.stack(losses).sum().item())

al.check("01.no_sync_loop", fast_loop)

# %% wrong: a bfloat16 accumulator (its steps are too coarse for the total)
def fast_loop(losses):
    total = torch.zeros((), dtype=torch.bfloat16, device=losses[0].device)
    for l in losses:
        total += l
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong: the .item() calls moved into a thread pool (still one read, and one wait, per loss)
from concurrent.futures import ThreadPoolExecutor

def fast_loop(losses):
    with ThreadPoolExecutor(max_workers=4) as pool:
        return sum(pool.map(lambda l: l.item(), losses))

al.check("01.no_sync_loop", fast_loop)

# %% wrong: a background thread reads every loss while the caller waits for it
import threading

def fast_loop(losses):
    box = [0.0]

    def reader():
        for l in losses:
            box[0] += float(l)

    t = threading.Thread(target=reader)
    t.start()
    t.join()
    return box[0]

al.check("01.no_sync_loop", fast_loop)

# %% wrong: every loss copied to the host with .cpu(), summed there
def fast_loop(losses):
    return torch.stack([l.cpu() for l in losses]).sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% raises "Expected all tensors to be on the same device": a CPU accumulator, += a GPU loss in place
def fast_loop(losses):
    total = torch.tensor(0.0)
    for l in losses:
        total += l
    return total.item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong: each loss copied non_blocking into a pageable host buffer (each copy to pageable memory waits)
def fast_loop(losses):
    host = torch.empty(len(losses))
    for i, l in enumerate(losses):
        host[i].copy_(l, non_blocking=True)
    return host.sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% right: one non_blocking copy of the stacked losses into pinned memory, then an event wait
def fast_loop(losses):
    dev = torch.stack(losses)
    host = torch.empty(dev.shape, dtype=dev.dtype, pin_memory=True)
    host.copy_(dev, non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    ev.synchronize()
    return host.sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% right: the running sum in a torch.compile'd function, read once with .item() after it
@torch.compile
def running_total(losses):
    total = torch.zeros((), device=losses[0].device)
    for loss in losses:
        total = total + loss
    return total

def fast_loop(losses):
    return running_total(losses).item()

al.check("01.no_sync_loop", fast_loop)

# %% right: the whole loop decorated with @torch.compile, one .item() at its end
@torch.compile
def fast_loop(losses):
    return torch.stack(losses).sum().item()

al.check("01.no_sync_loop", fast_loop)

# %% wrong "50 host reads": torch.compile'd, but each step's loss read with float() inside the loop
@torch.compile
def fast_loop(losses):
    total = 0.0
    for loss in losses:
        total += float(loss)
    return total

al.check("01.no_sync_loop", fast_loop)
