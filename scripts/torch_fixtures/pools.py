"""Writes PyTorch's pooling (`F.max_pool2d`, `F.avg_pool2d`, their 1D forms and the adaptive
average pools) of small inputs, and their input gradients, for the test that towers_kernels'
pooling layers give PyTorch's values (crates/kernels/tests/pools.rs).

    /tmp/tfvenv/bin/python scripts/torch_fixtures/pools.py crates/kernels/tests/data/pools.txt

Each input's i-th value is `sin(0.37 i + 0.1 seed)`, for max pools `floor(3 sin(...))` (few
values: windows hold ties); the loss is `sum(y * w)`, `w`'s i-th value `1.5 + cos(0.11 i)`.
Each line: `KIND<TAB>SETTINGS<TAB>DIMS<TAB>NAME<TAB>VALUES` (NAME one of x, w, y, dx; VALUES
space-separated, float32 written exactly), four lines a case. SETTINGS by KIND: `max2d` kernel
(2), stride (2), padding (2), ceil; `avg2d` the same and count_include_pad; `max1d` kernel,
stride, padding, ceil; `avg1d` the same and count_include_pad; `adaptive2d` and `adaptive3d`
the output size (2 or 3); `adaptive1d` the output size.
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

CASES = [
    # ResNet's stem pool; ceil mode with a last window cut short; a 2x2 padded by 1.
    ("max2d", [3, 3, 2, 2, 1, 1, 0], [2, 3, 11, 12]),
    ("max2d", [3, 3, 2, 2, 1, 1, 1], [1, 2, 10, 9]),
    ("max2d", [2, 2, 2, 2, 1, 1, 0], [1, 2, 7, 8]),
    # DenseNet's transition; padded windows in ceil mode, counting the padding and not; stride
    # 1 (the window-sum kernel); uneven windows and strides.
    ("avg2d", [2, 2, 2, 2, 0, 0, 0, 1], [2, 3, 8, 9]),
    ("avg2d", [3, 3, 2, 2, 1, 1, 1, 1], [1, 2, 10, 9]),
    ("avg2d", [3, 3, 2, 2, 1, 1, 1, 0], [1, 2, 10, 9]),
    ("avg2d", [3, 3, 1, 1, 1, 1, 0, 0], [1, 2, 6, 7]),
    ("avg2d", [5, 3, 2, 3, 2, 1, 1, 1], [1, 2, 11, 10]),
    ("max1d", [3, 2, 1, 0], [2, 3, 17]),
    ("max1d", [4, 4, 0, 1], [1, 2, 18]),
    ("avg1d", [3, 2, 1, 1, 0], [2, 3, 17]),
    ("avg1d", [4, 4, 0, 1, 1], [1, 2, 18]),
    ("adaptive2d", [3, 5], [2, 3, 7, 13]),
    ("adaptive2d", [1, 1], [1, 4, 7, 7]),
    ("adaptive2d", [7, 4], [1, 2, 5, 6]),
    ("adaptive1d", [4], [2, 3, 30]),
    ("adaptive3d", [2, 3, 5], [1, 2, 7, 5, 13]),
]


def pool(kind, s, x):
    if kind == "max2d":
        return F.max_pool2d(x, s[0:2], s[2:4], s[4:6], ceil_mode=bool(s[6]))
    if kind == "avg2d":
        return F.avg_pool2d(
            x, s[0:2], s[2:4], s[4:6], ceil_mode=bool(s[6]), count_include_pad=bool(s[7])
        )
    if kind == "max1d":
        return F.max_pool1d(x, s[0], s[1], s[2], ceil_mode=bool(s[3]))
    if kind == "avg1d":
        return F.avg_pool1d(x, s[0], s[1], s[2], ceil_mode=bool(s[3]), count_include_pad=bool(s[4]))
    if kind == "adaptive2d":
        return F.adaptive_avg_pool2d(x, s)
    if kind == "adaptive3d":
        return F.adaptive_avg_pool3d(x, s)
    return F.adaptive_avg_pool1d(x, s[0])


def main(out):
    with open(out, "w") as f:
        for seed, (kind, settings, dims) in enumerate(CASES):
            numel = int(np.prod(dims))
            x = np.sin(0.37 * np.arange(numel) + 0.1 * seed)
            if kind.startswith("max"):
                x = np.floor(3 * x)
            x = torch.tensor(x, dtype=torch.float32).reshape(dims).requires_grad_()
            y = pool(kind, settings, x)
            w = torch.tensor(1.5 + np.cos(0.11 * np.arange(y.numel())), dtype=torch.float32)
            w = w.reshape(y.shape)
            (y * w).sum().backward()
            head = f"{kind}\t{' '.join(map(str, settings))}\t{' '.join(map(str, dims))}"
            for name, t in [("x", x), ("w", w), ("y", y), ("dx", x.grad)]:
                flat = t.detach().numpy().astype(np.float32).ravel()
                f.write(f"{head}\t{name}\t{' '.join(repr(float(v)) for v in flat)}\n")
    print(f"PyTorch {torch.__version__}: {out}")


if __name__ == "__main__":
    main(sys.argv[1])
