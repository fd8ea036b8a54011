# Answers to lesson 08's exercise 2 (08.quiet_logger), written the way learners write them.
# Each cell runs in a fresh process after the notebook's set-up; tests/answers.py says how.

# %% right: a running sum on the GPU, read at each logged step, as the solution
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        total = loss.detach() if total is None else total + loss.detach()
        if step % every == 0:
            mean, total = total.item() / every, None
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% right: a list of GPU tensors, stacked and averaged when logging
import torch

def make_logger(every):
    buffer = []
    def log(step, loss):
        buffer.append(loss.detach())
        if step % every == 0:
            mean = torch.stack(buffer).mean().item()
            buffer.clear()
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% right: a class with __call__ and a zero tensor made lazily on the loss's device
import torch

class Logger:
    def __init__(self, every):
        self.every, self.total = every, None

    def __call__(self, step, loss):
        if self.total is None:
            self.total = torch.zeros((), device=loss.device)
        self.total += loss.detach()
        if step % self.every == 0:
            value = float(self.total) / self.every
            self.total.zero_()
            return value

def make_logger(every):
    return Logger(every)

al.check("08.quiet_logger", make_logger)

# %% right: sum() of the buffer, then .item()
def make_logger(every):
    losses = []
    def log(step, loss):
        losses.append(loss)
        if step % every == 0:
            value = (sum(losses) / every).item()
            losses.clear()
            return value
    return log

al.check("08.quiet_logger", make_logger)

# %% right: .cpu() of the sum, then float
def make_logger(every):
    acc = [0]
    def log(step, loss):
        acc[0] = acc[0] + loss
        if step % every == 0:
            mean = float(acc[0].cpu()) / every
            acc[0] = 0
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% right: a synchronize, then the read (one wait per logged line)
import torch

def make_logger(every):
    state = {"sum": None}
    def log(step, loss):
        state["sum"] = loss if state["sum"] is None else state["sum"] + loss
        if step % every == 0:
            torch.cuda.synchronize()
            value = state["sum"].item() / every
            state["sum"] = None
            return value
    return log

al.check("08.quiet_logger", make_logger)

# %% right: torch.mean over a stacked window, converted with tolist()
import torch

def make_logger(every):
    window = []
    def log(step, loss):
        window.append(loss)
        if len(window) == every:
            out = torch.stack(window).mean().tolist()
            window.clear()
            return out
        return None
    return log

al.check("08.quiet_logger", make_logger)

# %% right: it also prints the line it returns
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        total = loss if total is None else total + loss
        if step % every == 0:
            mean = total.item() / every
            print(f"step {step}: loss {mean:.4f}")
            total = None
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% right: a running sum kept with add_ in place on a clone
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        if total is None:
            total = loss.detach().clone()
        else:
            total.add_(loss)
        if step % every == 0:
            mean = total.item() / every
            total = None
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% right: the mean of the window by torch.cat of 1-element views
import torch

def make_logger(every):
    parts = []
    def log(step, loss):
        parts.append(loss.reshape(1))
        if step % every == 0:
            value = torch.cat(parts).sum().item() / every
            parts.clear()
            return value
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "host reads": the starter, .item() every step
def make_logger(every):
    def log(step, loss):
        value = loss.item()
        if step % every == 0:
            return value
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "host reads": the mean right, but from floats read every step
def make_logger(every):
    values = []
    def log(step, loss):
        values.append(loss.item())
        if step % every == 0:
            mean = sum(values[-every:]) / every
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "host reads": float() every step
def make_logger(every):
    total = 0.0
    def log(step, loss):
        nonlocal total
        total += float(loss)
        if step % every == 0:
            mean, total = total / every, 0.0
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "host reads": a guard against NaN every step
import math

def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        if math.isnan(loss):
            raise ValueError("loss is NaN")
        total = loss if total is None else total + loss
        if step % every == 0:
            mean, total = total.item() / every, None
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "host reads": if loss > 10 every step, a read in disguise
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        if loss > 10:
            print("loss spike")
        total = loss if total is None else total + loss
        if step % every == 0:
            mean, total = total.item() / every, None
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "host reads": a synchronize every step
import torch

def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        torch.cuda.synchronize()
        total = loss if total is None else total + loss
        if step % every == 0:
            mean, total = total.item() / every, None
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "the mean of the last": the mean since the start, never reset
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        total = loss if total is None else total + loss
        if step % every == 0:
            return total.item() / step
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "the mean of the last": the sum, not the mean
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        total = loss if total is None else total + loss
        if step % every == 0:
            value, total = total.item(), None
            return value
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "return None between logging steps": logs at every step
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        total = loss if total is None else total + loss
        return total
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "as a Python float": returns the GPU tensor
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        total = loss if total is None else total + loss
        if step % every == 0:
            mean, total = total / every, None
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "the mean of the last": a copy to the host without waiting, read too early
import torch

def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        total = loss if total is None else total + loss
        if step % every == 0:
            host = total.to("cpu", non_blocking=True)
            total = None
            return host.numpy().item() / every
    return log

al.check("08.quiet_logger", make_logger)

# %% wrong "as a Python float at steps": one step off, logs at step % every == 1
def make_logger(every):
    total = None
    def log(step, loss):
        nonlocal total
        total = loss if total is None else total + loss
        if step % every == 1 and step > 1:
            mean, total = total.item() / every, None
            return mean
    return log

al.check("08.quiet_logger", make_logger)

# %% right: a list of detached losses, stacked and read once per logged line
import torch

def make_logger(every):
    window = []

    def log(step, loss):
        window.append(loss.detach())
        if step % every == 0:
            value = torch.stack(window).mean().item()
            window.clear()
            return value
        return None

    return log

al.check("08.quiet_logger", make_logger)

# %% right: a GPU buffer of `every` slots written in place, read once
import torch

def make_logger(every):
    buf = {}

    def log(step, loss):
        if "t" not in buf:
            buf["t"] = torch.zeros(every, device=loss.device, dtype=loss.dtype)
        buf["t"][(step - 1) % every] = loss.detach()
        if step % every == 0:
            return buf["t"].mean().item()

    return log

al.check("08.quiet_logger", make_logger)

# %% right: a float64 running sum on the GPU
def make_logger(every):
    state = {"sum": None}

    def log(step, loss):
        x = loss.detach().double()
        state["sum"] = x if state["sum"] is None else state["sum"] + x
        if step % every == 0:
            s, state["sum"] = state["sum"], None
            return s.item() / every

    return log

al.check("08.quiet_logger", make_logger)

# %% right: returns a numpy float64 (a Python float subclass)
import torch
import numpy as np

def make_logger(every):
    kept = []

    def log(step, loss):
        kept.append(loss.detach())
        if step % every == 0:
            m = np.float64(torch.stack(kept).mean().item())
            kept.clear()
            return m

    return log

al.check("08.quiet_logger", make_logger)

# %% right: non_blocking copies into 0-d slots of a pinned buffer, one stream synchronize per logged line
import torch

def make_logger(every):
    host = torch.zeros(every, pin_memory=True)

    def log(step, loss):
        host[(step - 1) % every].copy_(loss.detach(), non_blocking=True)
        if step % every == 0:
            torch.cuda.current_stream().synchronize()
            return host.mean().item()

    return log

al.check("08.quiet_logger", make_logger)

# %% wrong: non_blocking copies into a pinned buffer, read without any wait
import torch

def make_logger(every):
    host = torch.zeros(every, pin_memory=True)

    def log(step, loss):
        host[(step - 1) % every].copy_(loss.detach(), non_blocking=True)
        if step % every == 0:
            return host.mean().item()

    return log

al.check("08.quiet_logger", make_logger)

# %% wrong: non_blocking copies into a pageable buffer (each copy to pageable memory makes the host wait)
import torch

def make_logger(every):
    host = torch.zeros(every)

    def log(step, loss):
        host[(step - 1) % every].copy_(loss.detach(), non_blocking=True)
        if step % every == 0:
            return host.mean().item()

    return log

al.check("08.quiet_logger", make_logger)

# %% wrong: host[i] = loss into a CPU buffer (a blocking copy every step)
import torch

def make_logger(every):
    host = torch.zeros(every)

    def log(step, loss):
        host[(step - 1) % every] = loss
        if step % every == 0:
            return float(host.mean())

    return log

al.check("08.quiet_logger", make_logger)

# %% wrong: a worker thread calls .item() on every loss, the logger waits for it once per line
import queue
import threading

def make_logger(every):
    q, sums = queue.Queue(), []

    def worker():
        while True:
            loss = q.get()
            sums.append(loss.item())
            q.task_done()

    threading.Thread(target=worker, daemon=True).start()

    def log(step, loss):
        q.put(loss.detach())
        if step % every == 0:
            q.join()
            value = sum(sums[-every:]) / every
            return value

    return log

al.check("08.quiet_logger", make_logger)

# %% wrong: returns the mean as a 0-d GPU tensor (never read as a Python float)
import torch

def make_logger(every):
    window = []

    def log(step, loss):
        window.append(loss.detach())
        if step % every == 0:
            m = torch.stack(window).mean()
            window.clear()
            return m

    return log

al.check("08.quiet_logger", make_logger)

# %% wrong: returns 0.0 instead of None between logged lines
import torch

def make_logger(every):
    window = []

    def log(step, loss):
        window.append(loss.detach())
        if step % every:
            return 0.0
        value = torch.stack(window).mean().item()
        window.clear()
        return value

    return log

al.check("08.quiet_logger", make_logger)

# %% wrong: the sum of the window, not its mean
import torch

def make_logger(every):
    window = []

    def log(step, loss):
        window.append(loss.detach())
        if step % every == 0:
            value = torch.stack(window).sum().item()
            window.clear()
            return value

    return log

al.check("08.quiet_logger", make_logger)

# %% wrong: the window never cleared (the mean of every loss so far)
import torch

def make_logger(every):
    seen = []

    def log(step, loss):
        seen.append(loss.detach())
        if step % every == 0:
            return torch.stack(seen).mean().item()

    return log

al.check("08.quiet_logger", make_logger)
