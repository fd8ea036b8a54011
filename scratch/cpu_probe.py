import json, os, sys, time, statistics, torch
def ms(fn, n=10):
    fn(); ts=[]
    for _ in range(n):
        t0=time.perf_counter(); fn(); ts.append((time.perf_counter()-t0)*1e3)
    return statistics.median(ts)
x = torch.randn(256, 3, 64, 64)  # 12 MiB
r = {"threads": torch.get_num_threads(),
     "randn_12MiB": ms(lambda: torch.randn(256, 3, 64, 64)),
     "tanh_12MiB": ms(lambda: torch.tanh(x)),
     "add_12MiB": ms(lambda: x + 1),
     "clone_12MiB": ms(lambda: x.clone()),
     "pin_12MiB": ms(lambda: x.pin_memory()),
     "randn_96MiB": ms(lambda: torch.randn(8, 256, 3, 64, 64), n=5)}
print(json.dumps({k: round(v, 3) for k, v in r.items()}))
os.makedirs(sys.argv[1], exist_ok=True); json.dump(r, open(os.path.join(sys.argv[1], "cpu_probe.json"), "w"))
