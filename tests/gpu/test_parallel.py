"""asynclab.Parallel: same outputs and gradients as running the branches in turn, on the CPU and (when present) a GPU."""
import pytest
import torch
from torch import nn

import asynclab as al


def branches(device, seed=0):
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, k)).to(device) for k in (3, 5, 7)]


def grads_of(mods, x, run):
    for m in mods:
        m.zero_grad()
    x = x.detach().clone().requires_grad_(True)
    outs = run(mods, x)
    sum((o * o).sum() * (i + 1) for i, o in enumerate(outs)).backward()
    return [x.grad.clone()] + [p.grad.clone() for m in mods for p in m.parameters()], [o.detach() for o in outs]


def sequential(mods, x):
    return tuple(m(x) for m in mods)


def parallel(mods, x):
    return al.Parallel(*mods)(x)


def check_same(device):
    mods = branches(device)
    x = torch.randn(64, 16, device=device)
    g_seq, o_seq = grads_of(mods, x, sequential)
    g_par, o_par = grads_of(mods, x, parallel)
    assert [o.shape for o in o_par] == [(64, 3), (64, 5), (64, 7)]
    for a, b in zip(o_par + g_par, o_seq + g_seq):
        torch.testing.assert_close(a, b)


def test_cpu_same_outputs_and_gradients():
    check_same("cpu")


def test_wrong_arguments_are_one_clear_error():
    with pytest.raises(ValueError, match="at least one branch"):
        al.Parallel()
    with pytest.raises(TypeError, match="branch 1"):
        al.Parallel(nn.Identity(), 3)


def test_plain_functions_and_several_outputs():
    par = al.Parallel(lambda a, b: a + b, lambda a, b: (a * b, {"d": a - b}))
    s, (p, rest) = par(torch.ones(2), torch.full((2,), 3.0))
    assert s.tolist() == [4.0, 4.0] and p.tolist() == [3.0, 3.0] and rest["d"].tolist() == [-2.0, -2.0]
    assert "2 branches" in repr(par)


@pytest.mark.gpu
def test_gpu_same_outputs_and_gradients():
    check_same("cuda")


@pytest.mark.gpu
def test_gpu_branches_run_on_their_own_streams_and_caller_waits():
    seen = []

    def spy(x):
        seen.append(torch.cuda.current_stream())
        torch.cuda._sleep(20_000_000)  # a slow branch: the caller must still see its result
        return x * 2

    par = al.Parallel(spy, spy)
    x = torch.ones(1 << 20, device="cuda")
    a, b = par(x)
    c = a + b  # queued on the caller's stream right away
    torch.cuda.synchronize()
    assert len({s.cuda_stream for s in seen}) == 2
    assert all(s != torch.cuda.current_stream() for s in seen)
    assert bool((c == 4).all())
    assert par.streams("cuda") == par.streams(torch.device("cuda"))  # made once, reused


@pytest.mark.gpu
def test_gpu_parallel_is_capturable_in_a_cuda_graph():
    from asynclab.lessons.streams.experiments import captured

    torch.manual_seed(0)
    branches = [torch.nn.Linear(64, 64).cuda() for _ in range(4)]
    par = al.Parallel(*branches)
    x = torch.randn(8, 64, device="cuda")
    with torch.no_grad():
        replay = captured(lambda: par(x), torch.device("cuda"))
        x.copy_(torch.randn(8, 64, device="cuda"))  # new data in the captured input
        got = replay()
        want = [b(x) for b in branches]
    torch.cuda.synchronize()
    assert all(torch.allclose(g, w, rtol=1e-4, atol=1e-4) for g, w in zip(got, want))
    assert len({s.cuda_stream for s in par.streams("cuda")}) == 4  # the branches were captured on four streams
