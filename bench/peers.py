#!/usr/bin/env python3
"""peers.py - the peers bench/run compares clt with: NumPy on the host, PyOpenCL on cl:0.

    python3 bench/peers.py numpy     [--reps N]   # add 16M f32, 3-element add, matmul 1024 f32
    python3 bench/peers.py pyopencl  [--reps N]   # a + b and pyopencl.array.sum, 16M f32
    python3 bench/peers.py first-op                # one fresh-process first op (run it often)

Prints "kv key value" lines (milliseconds, or microseconds for the 3-element add) and
"info ..." lines. Medians of N runs (default 9) after 2 warm-up runs, wall clock
(time.perf_counter), each run ending when the work is done (queue.finish() for PyOpenCL).
PyOpenCL uses the first device of the first platform, the device bench/ops calls "raw".
A missing module prints "peer missing: ..." and exits 0, so that bench/run still runs.
"""
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


def main(argv):
    if len(argv) < 2 or argv[1] not in ("numpy", "pyopencl", "first-op"):
        sys.exit("usage: peers.py numpy|pyopencl|first-op [--reps N]")
    reps = 9
    if len(argv) == 4 and argv[2] == "--reps":
        reps = int(argv[3])
    if argv[1] == "numpy":
        run_numpy(reps)
    elif argv[1] == "pyopencl":
        run_pyopencl(reps)
    else:
        run_first_op()


if __name__ == "__main__":
    main(sys.argv)
