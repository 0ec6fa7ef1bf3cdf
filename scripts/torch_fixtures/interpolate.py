"""Writes PyTorch's bilinear and linear resizing (`F.interpolate`) of small inputs, and their
input gradients, for the test that towers_kernels' resizing gives PyTorch's values
(crates/kernels/tests/interpolate.rs).

    /tmp/tfvenv/bin/python scripts/torch_fixtures/interpolate.py crates/kernels/tests/data/interpolate.txt

Each input's i-th value is `sin(0.37 i + 0.1 seed)`; the loss is `sum(y * w)`, `w`'s i-th value
`1.5 + cos(0.11 i)`. Each line: `N C H W<TAB>OUT_H OUT_W<TAB>ALIGN<TAB>NAME<TAB>VALUES` (NAME
one of x, w, y, dx; VALUES space-separated, float32 written exactly), four lines a case. A case
from and to height 1 is `F.interpolate(..., mode="linear")` of `[N, C, W]`.
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

# (input [n, c, h, w], output [h, w], align_corners): doubling, an uneven ratio up and down,
# halving, down to one value, from one value, one row (linear).
CASES = [
    ([2, 3, 4, 4], [8, 8], False),
    ([2, 3, 4, 4], [8, 8], True),
    ([1, 2, 5, 7], [11, 4], False),
    ([1, 2, 5, 7], [11, 4], True),
    ([1, 3, 9, 6], [4, 3], False),
    ([1, 1, 6, 5], [1, 1], True),
    ([1, 1, 6, 5], [1, 2], False),
    ([1, 2, 1, 1], [3, 4], False),
    ([2, 2, 1, 9], [1, 20], False),
    ([2, 2, 1, 9], [1, 4], True),
]


def values(name, dims, out, align, tensor):
    text = " ".join(repr(float(v)) for v in tensor.detach().numpy().astype(np.float32).ravel())
    head = f"{' '.join(map(str, dims))}\t{out[0]} {out[1]}\t{int(align)}\t{name}"
    return f"{head}\t{text}\n"


def main(out):
    with open(out, "w") as f:
        for seed, (dims, size, align) in enumerate(CASES):
            numel = int(np.prod(dims))
            x = torch.tensor(np.sin(0.37 * np.arange(numel) + 0.1 * seed), dtype=torch.float32)
            x = x.reshape(dims).requires_grad_()
            if dims[2] == 1 and size[0] == 1:
                y = F.interpolate(x[:, :, 0], size=size[1], mode="linear", align_corners=align)
                y = y.unsqueeze(2)
            else:
                y = F.interpolate(x, size=size, mode="bilinear", align_corners=align)
            w = torch.tensor(1.5 + np.cos(0.11 * np.arange(y.numel())), dtype=torch.float32)
            w = w.reshape(y.shape)
            (y * w).sum().backward()
            for name, t in [("x", x), ("w", w), ("y", y), ("dx", x.grad)]:
                f.write(values(name, dims, size, align, t))
    print(f"PyTorch {torch.__version__}: {out}")


if __name__ == "__main__":
    main(sys.argv[1])
