#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""peers.py - the peers bench/run compares clt with: NumPy on the host, PyOpenCL on cl:0.

    python3 bench/peers.py numpy     [--reps N]   # add 16M f32, 3-element add, matmul 1024 f32, A x 4096 f32, CG 2048
    python3 bench/peers.py pyopencl  [--reps N]   # a + b and pyopencl.array.sum, 16M f32
    python3 bench/peers.py first-op                # one fresh-process first op (run it often)
    python3 bench/peers.py torch     [--reps N]   # PyTorch on its first CUDA GPU (tools/gpu-check)
    python3 bench/peers.py torch-first-op          # the first op, in PyTorch on that GPU
    python3 bench/peers.py torch-cpu [--reps N]   # bench/autograd's cases in PyTorch on the CPU

Prints "kv key value" lines (milliseconds, or microseconds for the 3-element add) and
"info ..." lines. Medians of N runs (default 9) after 2 warm-up runs, wall clock
(time.perf_counter), each run ending when the work is done (queue.finish() for PyOpenCL).
PyOpenCL uses the first device of the first platform, the device bench/ops calls "raw".
A missing module prints "peer missing: ..." and exits 0, so that bench/run still runs.
The torch modes are what tools/gpu-check sets beside clt on a real GPU: the same cases as
bench/ops, bench/matmul and bench/transfer, each run ending with torch.cuda.synchronize(), f32
matmul without TF32 (torch.backends.cuda.matmul.allow_tf32 = False, PyTorch's default).
The torch-cpu mode is bench/autograd's peer (issue 26): the same 784-256-10 MLP training step
(AdamW, cross entropy), its parts, and the same 20-op autograd chain, in PyTorch on the CPU
with as many threads as clt's host uses (below); medians of N steps (default 21 there).
"""
import os
import statistics
import sys
import time

WARMUP = 2


def median_time(fn, reps, inner=1):
    """Median seconds of one fn() call; fn runs inner times per timed run."""
    for _ in range(WARMUP):
        for _ in range(inner):
            fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def blas_info(np):
    """One line on the BLAS NumPy calls: threadpoolctl if present, else numpy.show_config."""
    try:
        import threadpoolctl

        libs = [
            "%s %s (%s, %s threads, %s)"
            % (i.get("internal_api"), i.get("version"), i.get("threading_layer", "?"),
               i.get("num_threads"), i.get("filepath"))
            for i in threadpoolctl.threadpool_info()
            if i.get("user_api") == "blas"
        ]
        return "numpy %s BLAS (threadpoolctl): %s" % (np.__version__, "; ".join(libs) or "none")
    except ImportError:
        pass
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        np.show_config()
    keep = [ln.strip() for ln in buf.getvalue().splitlines()
            if "libraries" in ln or "name" in ln or "version" in ln]
    return "numpy %s BLAS (show_config): %s" % (np.__version__, ", ".join(keep[:6]))


def run_numpy(reps):
    try:
        import numpy as np
    except ImportError:
        print("peer missing: numpy")
        return
    print("info " + blas_info(np))
    n = 16 << 20
    a = np.ones(n, dtype=np.float32)
    b = np.ones(n, dtype=np.float32)
    print("kv add_cpu_numpy_ms %.4f" % (1e3 * median_time(lambda: a + b, reps)))
    a3 = np.ones(3, dtype=np.float32)
    b3 = np.ones(3, dtype=np.float32)
    print("kv add3_cpu_numpy_us %.4f" % (1e6 * median_time(lambda: a3 + b3, reps, 20000)))
    m = 1024
    rng = np.random.default_rng(0)
    x = rng.random((m, m), dtype=np.float32) - 0.5
    y = rng.random((m, m), dtype=np.float32) - 0.5
    print("kv matmul1024_cpu_numpy_ms %.4f" % (1e3 * median_time(lambda: x @ y, reps)))
    n = 4096
    am = rng.random((n, n), dtype=np.float32) - 0.5
    xv = rng.random(n, dtype=np.float32) - 0.5
    print("kv mv4096_cpu_numpy_ms %.4f" % (1e3 * median_time(lambda: am @ xv, reps)))
    # bench/cg's solver: A = M^T M / n + I (M uniform in [-0.5, 0.5)), b = A 1, 20 CG steps
    n = 2048
    mm = rng.random((n, n), dtype=np.float32) - 0.5
    A = (mm.T @ mm) / np.float32(n) + np.eye(n, dtype=np.float32)
    bb = A @ np.ones(n, dtype=np.float32)

    def cg():
        x = np.zeros(n, dtype=np.float32)
        r = bb.copy()
        p = r.copy()
        rr = r @ r
        for _ in range(20):
            ap = A @ p
            alpha = rr / (p @ ap)
            x += alpha * p
            r -= alpha * ap
            rr2 = r @ r
            p = r + (rr2 / rr) * p
            rr = rr2
        return x
    print("kv cg2048_cpu_numpy_ms %.4f" % (1e3 * median_time(cg, reps)))
    # bench/linalg's rows: solve 2048 (diagonally dominant), cholesky 2048 and eigh 1024
    # (M M^T / n + I), svd 1024 x 512 (uniform, reduced)
    la = np.linalg
    n = 2048
    a64 = rng.random((n, n)) - 0.5 + np.eye(n) * (n / 4)
    b64 = rng.random(n) - 0.5
    a32, b32 = a64.astype(np.float32), b64.astype(np.float32)
    lreps = max(3, reps // 3)
    print("kv linalg_solve2048_f64_cpu_numpy_ms %.4f"
          % (1e3 * median_time(lambda: la.solve(a64, b64), lreps)))
    print("kv linalg_solve2048_f32_cpu_numpy_ms %.4f"
          % (1e3 * median_time(lambda: la.solve(a32, b32), lreps)))
    g = rng.random((n, n)) - 0.5
    spd32 = (g @ g.T / n + np.eye(n)).astype(np.float32)
    print("kv linalg_cholesky2048_f32_cpu_numpy_ms %.4f"
          % (1e3 * median_time(lambda: la.cholesky(spd32), lreps)))
    e = 1024
    g = rng.random((e, e)) - 0.5
    spd = g @ g.T / e + np.eye(e)
    print("kv linalg_eigh1024_f64_cpu_numpy_ms %.4f"
          % (1e3 * median_time(lambda: la.eigh(spd), lreps)))
    sv = rng.random((1024, 512)) - 0.5
    print("kv linalg_svd1024x512_f64_cpu_numpy_ms %.4f"
          % (1e3 * median_time(lambda: la.svd(sv, full_matrices=False), lreps)))


def run_pyopencl(reps):
    try:
        import numpy as np
        import pyopencl as cl
        import pyopencl.array as cla
    except ImportError as e:
        print("peer missing: %s" % e.name)
        return
    dev = cl.get_platforms()[0].get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    print("info pyopencl %s on %s" % (cl.VERSION_TEXT, dev.name))
    n = 16 << 20
    a = cla.to_device(q, np.ones(n, dtype=np.float32))
    b = cla.to_device(q, np.ones(n, dtype=np.float32))
    q.finish()

    def add():
        c = a + b
        q.finish()
        return c

    def total():
        s = cla.sum(a)
        q.finish()
        return s

    if add().get()[-1] != 2 or total().get() != n:
        sys.exit("peers.py: PyOpenCL gave a wrong result")
    print("kv add_cl_pyopencl_ms %.4f" % (1e3 * median_time(add, reps)))
    print("kv sum_cl_pyopencl_ms %.4f" % (1e3 * median_time(total, reps)))


def run_first_op():
    """What bench/program times, in PyOpenCL: device open first, then (untimed) nothing else;
    timed: two 1000-element f32 arrays on the device, a + b, the result read back."""
    try:
        import numpy as np
        import pyopencl as cl
        import pyopencl.array as cla
    except ImportError as e:
        print("peer missing: %s" % e.name)
        return
    dev = cl.get_platforms()[0].get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    t0 = time.perf_counter()
    a = cla.to_device(q, np.ones(1000, dtype=np.float32))
    b = cla.to_device(q, np.ones(1000, dtype=np.float32))
    out = (a + b).get()
    t1 = time.perf_counter()
    if out[0] != 2 or out[999] != 2:
        sys.exit("peers.py: PyOpenCL gave a wrong result")
    print("kv first_op_pyopencl_ms %.3f" % (1e3 * (t1 - t0)))


def cuda_torch():
    """torch, if it imports and sees a CUDA GPU; else prints "peer missing" and returns None."""
    try:
        import torch
    except ImportError:
        print("peer missing: torch (not importable)")
        return None
    if not torch.cuda.is_available():
        print("peer missing: torch %s sees no CUDA GPU" % torch.__version__)
        return None
    return torch


def run_torch(reps):
    torch = cuda_torch()
    if torch is None:
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda:0")
    print("info torch %s (CUDA %s) on %s, allow_tf32 %s"
          % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0),
             torch.backends.cuda.matmul.allow_tf32))
    sync = torch.cuda.synchronize

    def timed(fn, inner=1):
        def run():
            fn()
            sync()
        return median_time(run, reps, inner)

    n = 16 << 20
    a = torch.ones(n, dtype=torch.float32, device=dev)
    b = torch.ones(n, dtype=torch.float32, device=dev)
    if (a + b)[-1].item() != 2 or a.sum().item() != n:
        sys.exit("peers.py: torch gave a wrong result")
    print("kv add_cl_torch_ms %.4f" % (1e3 * timed(lambda: a + b)))
    print("kv sum_cl_torch_ms %.4f" % (1e3 * timed(lambda: a.sum())))
    a3 = torch.ones(3, dtype=torch.float32, device=dev)
    b3 = torch.ones(3, dtype=torch.float32, device=dev)
    print("kv add3_cl_torch_us %.4f" % (1e6 * timed(lambda: a3 + b3, 200)))
    for m in (1024, 2048):
        g = torch.Generator(device=dev).manual_seed(0)
        x = torch.rand((m, m), generator=g, device=dev) - 0.5
        y = torch.rand((m, m), generator=g, device=dev) - 0.5
        print("kv matmul%d_cl_torch_ms %.4f" % (m, 1e3 * timed(lambda: x @ y)))
    # 64 MiB of f32 each way, as bench/transfer: to a new tensor from pageable or pinned memory.
    k = 16 << 20
    host = torch.ones(k, dtype=torch.float32)
    pinned = torch.ones(k, dtype=torch.float32).pin_memory()
    on_dev = torch.ones(k, dtype=torch.float32, device=dev)
    pinned_dst = torch.empty(k, dtype=torch.float32).pin_memory()
    print("kv h2d_pageable_torch_ms %.4f" % (1e3 * timed(lambda: host.to(dev))))
    print("kv h2d_pinned_torch_ms %.4f" % (1e3 * timed(lambda: pinned.to(dev))))
    print("kv d2h_pageable_torch_ms %.4f" % (1e3 * timed(lambda: on_dev.to("cpu"))))
    print("kv d2h_pinned_torch_ms %.4f" % (1e3 * timed(lambda: pinned_dst.copy_(on_dev))))


def run_torch_first_op():
    """bench/program's first op in PyTorch: CUDA initialised first (untimed), then timed: two
    1000-element f32 tensors on the GPU, a + b, the result read back."""
    torch = cuda_torch()
    if torch is None:
        return
    torch.cuda.init()
    torch.empty(1, device="cuda:0")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    a = torch.ones(1000, dtype=torch.float32).to("cuda:0")
    b = torch.ones(1000, dtype=torch.float32).to("cuda:0")
    out = (a + b).cpu()
    t1 = time.perf_counter()
    if out[0].item() != 2 or out[999].item() != 2:
        sys.exit("peers.py: torch gave a wrong result")
    print("kv first_op_torch_ms %.3f" % (1e3 * (t1 - t0)))


def host_threads():
    """The threads clt's host computes with: OpenMP (large elementwise ops and reductions) and
    OpenBLAS (matmul) both default to every core the process may run on, OMP_NUM_THREADS (and
    OPENBLAS_NUM_THREADS for OpenBLAS) overriding; torch gets the same count."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_torch_cpu(reps):
    """bench/autograd in PyTorch on the CPU: (a) one training step of a 784-256-10 MLP, batch 256,
    f32, AdamW(lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01), F.cross_entropy,
    zero_grad(set_to_none=True), backward, step; 3 warm-up steps, medians of reps steps, then the
    parts (forward, cross_entropy, zero_grad + backward, step) over reps more; (b) the 20-op chain
    (y = y * x, tanh, y + x, exp, five times, then sum) on 1000 f32 elements: forward without grad,
    forward recording the graph, forward + backward (then x.grad = None), each sample the mean of
    200 runs, medians of reps samples, interleaved; again on 4 elements (_tiny), and both on one
    thread (_1t). PyTorch on the CPU computes synchronously: a
    call's work is done when it returns. Peak memory: not measured, torch has no allocator
    statistics for the CPU (torch.cuda.max_memory_allocated is CUDA only)."""
    try:
        import warnings

        # torch warns on stderr when it finds no NumPy, which it does not need here
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("peer missing: torch (not importable)")
        return
    nthreads = host_threads()
    torch.set_num_threads(nthreads)
    torch.manual_seed(1)
    print("info torch %s on the CPU, %d threads (torch.set_num_threads: the count clt's host uses, "
          "OpenMP's and OpenBLAS's default of every core)" % (torch.__version__, nthreads))
    print("kv torch_cpu_threads %d" % nthreads)
    batch, n_in, n_hid, n_out = 256, 784, 256, 10
    w1 = (torch.randn(n_hid, n_in) / n_in ** 0.5).requires_grad_()
    b1 = torch.zeros(n_hid).requires_grad_()
    w2 = (torch.randn(n_out, n_hid) / n_hid ** 0.5).requires_grad_()
    b2 = torch.zeros(n_out).requires_grad_()
    x = torch.randn(batch, n_in)
    y = torch.randint(0, n_out, (batch,), dtype=torch.int64)
    opt = torch.optim.AdamW([w1, b1, w2, b2], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    losses = []

    def step():
        t0 = time.perf_counter()
        logits = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        losses.append(loss.item())
        return t1 - t0

    def step_parts():
        t0 = time.perf_counter()
        logits = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
        t1 = time.perf_counter()
        loss = F.cross_entropy(logits, y)
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        losses.append(loss.item())
        return (t1 - t0, t2 - t1, t3 - t2, t4 - t3)

    for _ in range(3):
        step()
    steps = [step() for _ in range(reps)]
    parts = [step_parts() for _ in range(reps)]
    if not all(l == l for l in losses) or not losses[-1] < losses[0]:
        sys.exit("peers.py: the torch MLP loss did not fall: %g -> %g" % (losses[0], losses[-1]))
    print("info torch MLP loss %.4f -> %.4f over %d steps" % (losses[0], losses[-1], len(losses)))
    print("kv autograd_mlp_torch_ms %.4f" % (1e3 * statistics.median(steps)))
    for i, name in enumerate(("fwd", "ce", "bwd", "opt")):
        print("kv autograd_mlp_torch_%s_ms %.4f" % (name, 1e3 * statistics.median(p[i] for p in parts)))
    print("info torch peak memory on the CPU: not measurable (no CPU allocator statistics)")

    for n, sfx in ((1000, ""), (4, "_tiny")):
        torch_chain(torch, reps, n, sfx)
    # clt's host runs tensors this small on the calling thread; torch may split them among its
    # threads (on a 2-core machine that made a 1000-element tanh 4-20 times slower): the chain
    # again on one thread
    torch.set_num_threads(1)
    for n, sfx in ((1000, "_1t"), (4, "_tiny_1t")):
        torch_chain(torch, reps, n, sfx)
    torch.set_num_threads(nthreads)


def torch_chain(torch, reps, n, sfx):
    """bench/autograd's 20-op chain on n f32 elements: fwd, rec, bwd (us per run) and per op."""
    vals = [((i * 7919) % 1000) / 1000.0 * 1.6 - 0.8 for i in range(n)]
    xp = torch.tensor(vals, dtype=torch.float32)
    xg = torch.tensor(vals, dtype=torch.float32).requires_grad_()

    def chain(t):
        v = t
        for i in range(20):
            k = i % 4
            v = v * t if k == 0 else torch.tanh(v) if k == 1 else v + t if k == 2 else torch.exp(v)
        return v.sum()

    def fwd():
        chain(xp)

    def rec():
        chain(xg)

    def bwd():
        chain(xg).backward()
        xg.grad = None

    cases = (("fwd", fwd), ("rec", rec), ("bwd", bwd))
    iters = 200
    samples = {name: [] for name, _ in cases}
    for r in range(-2, reps):
        for j in range(len(cases)):
            name, fn = cases[(j + r + 2) % len(cases)]
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            us = 1e6 * (time.perf_counter() - t0) / iters
            if r >= 0:
                samples[name].append(us)
    med = {name: statistics.median(v) for name, v in samples.items()}
    for name in ("fwd", "rec", "bwd"):
        print("kv autograd_chain_%s%s_torch_us %.4f" % (name, sfx, med[name]))
    print("kv autograd_overhead_per_op%s_torch_us %.4f" % (sfx, (med["bwd"] - med["fwd"]) / 20))
    print("kv autograd_fwdbwd_per_op%s_torch_us %.4f" % (sfx, med["bwd"] / 20))
    print("kv autograd_record_per_op%s_torch_us %.4f" % (sfx, (med["rec"] - med["fwd"]) / 20))


def main(argv):
    modes = ("numpy", "pyopencl", "first-op", "torch", "torch-first-op", "torch-cpu")
    if len(argv) < 2 or argv[1] not in modes:
        sys.exit("usage: peers.py %s [--reps N]" % "|".join(modes))
    reps = 9
    if len(argv) == 4 and argv[2] == "--reps":
        reps = int(argv[3])
    if argv[1] == "numpy":
        run_numpy(reps)
    elif argv[1] == "pyopencl":
        run_pyopencl(reps)
    elif argv[1] == "torch":
        run_torch(reps)
    elif argv[1] == "torch-first-op":
        run_torch_first_op()
    elif argv[1] == "torch-cpu":
        run_torch_cpu(reps)
    else:
        run_first_op()


if __name__ == "__main__":
    main(sys.argv)
