#!/usr/bin/env python3
"""PyTorch's embedding_bag on a CUDA device, for shemb-bench gpu.

Reads the batches of bags shemb-bench wrote (raw little-endian int64
offsets with nbags + 1 entries, and ids; --offsets and --ids each a
comma-separated list of files, one per batch), builds a table of the same
shape and storage dtype, runs torch.nn.functional.embedding_bag (mode sum)
on the batches in turn, as shemb-bench does, a number of times and prints
the median time of one call in milliseconds as "torch_ms <value>".  With --train, one call is a training step instead:
the forward with sparse gradients, the backward of a gradient of --grad
everywhere, and torch.optim.SGD's step.  Exits 77 without torch or a
CUDA device.
"""
import argparse
import statistics
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--dim", type=int, required=True)
    p.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    p.add_argument("--offsets", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--train", action="store_true")
    p.add_argument("--grad", type=float, default=0.001)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("torch: not installed")
        return 77
    if not torch.cuda.is_available():
        print("torch: no CUDA device")
        return 77
    dev = torch.device("cuda")
    dtype = {"f32": torch.float32, "f16": torch.float16,
             "bf16": torch.bfloat16}[a.dtype]
    offsets = [_load(torch, p, dev) for p in a.offsets.split(",")]
    ids = [_load(torch, p, dev) for p in a.ids.split(",")]
    if len(offsets) != len(ids):
        print("torch: as many offsets files as ids files are needed")
        return 2
    weight = torch.empty(a.rows, a.dim, dtype=dtype, device=dev)
    weight.uniform_(-0.01, 0.01)
    make = _train_step if a.train else _lookup
    calls = [make(torch, F, i, weight, o, a) for i, o in zip(ids, offsets)]
    times = []
    # call -1 (untimed) on the last batch, call r on batch r % batches
    for r in range(-1, a.reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        calls[r % len(calls)]()
        torch.cuda.synchronize()
        if r >= 0:
            times.append(time.perf_counter() - t0)
    print("torch_ms %.6f" % (statistics.median(times) * 1e3))
    return 0


def _lookup(torch, F, ids, weight, offsets, a):
    def call():
        F.embedding_bag(ids, weight, offsets, mode="sum",
                        include_last_offset=True)
    return call


def _train_step(torch, F, ids, weight, offsets, a):
    weight.requires_grad_(True)
    opt = torch.optim.SGD([weight], lr=a.lr)
    grad = torch.full((offsets.numel() - 1, a.dim), a.grad,
                      dtype=weight.dtype, device=weight.device)

    def call():
        opt.zero_grad(set_to_none=True)
        out = F.embedding_bag(ids, weight, offsets, mode="sum",
                              include_last_offset=True, sparse=True)
        out.backward(grad)
        opt.step()
    return call


def _load(torch, path, dev):
    with open(path, "rb") as f:
        f.seek(0, 2)
        n = f.tell() // 8
    return torch.from_file(path, dtype=torch.int64, size=n).to(dev)


if __name__ == "__main__":
    sys.exit(main())
