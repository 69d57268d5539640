# SPDX-License-Identifier: MIT
# torch_grad.py - the PyTorch half of the comparison of gradients (issue 26; tests/torch_grad.sh
# runs it after tests/torch_grad.c). For each directory that tests/torch_grad wrote, loads the
# inputs (.npy files, read here without NumPy, which a torch install need not have), recomputes
# both losses in PyTorch (float64, torch.nn.functional, CPU) from the same weights and batch,
# calls backward, and compares each loss and each gradient with clt's:
#
#   diff = max |clt - torch| / max(max |torch|, tiny)      (one number per tensor, tiny = 1e-300)
#
# that is, the largest elementwise difference relative to the tensor's largest magnitude (a
# gradient entry that is nearly 0 is not divided by itself). A tensor passes when diff <= 1e-5
# (CLT_TORCH_GRAD_TOL overrides), and its shape and dtype (f64) match. One PASS/FAIL line per
# tensor; exit status 1 on any failure, 2 on bad usage or a missing file.
#
#   $ python3 tests/torch_grad.py DIR [DIR...]      (DIR may be LABEL=DIR, LABEL naming it)
import ast
import os
import sys
import warnings

with warnings.catch_warnings():  # torch warns at import when NumPy is missing; not needed here
    warnings.simplefilter("ignore")
    import torch
    import torch.nn.functional as F

NAMES = ["W1", "b1", "W2", "b2", "x"]
TINY = 1e-300


def load_npy(path):
    """The array of a .npy file that clt_save_npy wrote ('<f8' or '<i8', C order), as a tensor."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise OSError(f"{path}: not a .npy file")
    width = 2 if data[6] == 1 else 4  # the header's length: 2 bytes in version 1.0, else 4
    start = 8 + width
    end = start + int.from_bytes(data[8:start], "little")
    header = ast.literal_eval(data[start:end].decode("latin1"))
    dtypes = {"<f8": torch.float64, "<i8": torch.int64}
    if header["descr"] not in dtypes or header["fortran_order"]:
        raise OSError(f"{path}: {header['descr']}, fortran_order {header['fortran_order']}: "
                      "want '<f8' or '<i8' in C order")
    return torch.frombuffer(bytearray(data[end:]), dtype=dtypes[header["descr"]]).reshape(
        header["shape"])


def losses(t):
    """The two losses of tests/torch_grad.c from the leaves t (a dict of tensors)."""
    z1 = F.linear(t["x"], t["W1"], t["b1"])
    logits = F.linear(F.relu(z1), t["W2"], t["b2"])
    ce = F.cross_entropy(logits, t["target"])
    mix = (
        F.mse_loss(torch.softmax(logits, 1), t["onehot"])
        + 0.5 * torch.logsumexp(logits, 1).mean()
        + 0.01 * torch.tanh(torch.narrow(z1.transpose(0, 1), 0, 3, 6)).sum()
        + 0.1 * torch.select(torch.log_softmax(logits, 0), 1, 2).mean()
    )
    return z1, {"ce": ce, "mix": mix}


def compare(label, name, got, want, tol):
    """One PASS/FAIL line for clt's tensor got against PyTorch's want; True on a pass."""
    if got.shape != want.shape or got.dtype != want.dtype:
        print(f"FAIL: {label}: {name}: clt {got.dtype}{list(got.shape)}, "
              f"torch {want.dtype}{list(want.shape)}")
        return False
    scale = max(want.abs().max().item(), TINY)
    diff = (got - want).abs().max().item() / scale
    ok = diff <= tol  # False for NaN
    print(f"{'PASS' if ok else 'FAIL'}: {label}: {name}: max rel diff {diff:.2e} "
          f"(max |torch| {scale:.2e}, tol {tol:g})")
    return ok


def check_dir(label, d, tol):
    def load(name):
        return load_npy(os.path.join(d, name + ".npy"))

    leaves = {n: load(n).requires_grad_() for n in NAMES}
    t = dict(leaves)
    t["target"] = load("target")
    t["onehot"] = load("onehot")
    ok = True
    for which in ("ce", "mix"):
        for leaf in leaves.values():
            leaf.grad = None
        z1, ls = losses(t)
        if which == "ce":
            # The ReLU kink: a pre-activation within rounding of 0 could fall on either side.
            zmin = z1.detach().abs().min().item()
            active = (z1.detach() > 0).double().mean().item()
            good = zmin > 1e-8 and 0.2 < active < 0.8
            print(f"{'PASS' if good else 'FAIL'}: {label}: relu active on {100 * active:.0f}% "
                  f"of {z1.numel()} units, min |pre-activation| {zmin:.2e}")
            ok &= good
        loss = ls[which]
        loss.backward()
        ok &= compare(label, f"loss_{which}", load(f"loss_{which}"), loss.detach(), tol)
        for n in NAMES:
            ok &= compare(label, f"d loss_{which} / d {n}", load(f"grad_{which}_{n}"),
                          leaves[n].grad, tol)
    return ok


def main(argv):
    if len(argv) < 2:
        print(f"usage: {argv[0]} DIR [DIR...]", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    tol = float(os.environ.get("CLT_TORCH_GRAD_TOL", "1e-5"))
    ok = True
    for arg in argv[1:]:
        label, _, d = arg.rpartition("=")
        label = label or d
        try:
            ok &= check_dir(label, d, tol)
        except OSError as e:
            print(f"FAIL: {label}: {e}")
            return 2
    print(f"torch_grad.py: torch {torch.__version__}: {'all passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
