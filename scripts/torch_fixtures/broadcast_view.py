"""Writes crates/models/tests/data/torch_checkpoints/broadcast.pth: a state dict whose
`fc.weight` is a broadcast view, `torch.zeros(1).expand(2**25)`: 4 bytes of storage in a file
of about 1.7 KB that torch loads as a view and that 128 MiB of f32 values would materialize.
The reader must refuse it by its size before reading it.

    /tmp/tfvenv/bin/python scripts/torch_fixtures/broadcast_view.py crates/models/tests/data/torch_checkpoints
"""
import os
import sys

import torch


def main(out):
    path = os.path.join(out, "broadcast.pth")
    torch.save({"fc.weight": torch.zeros(1).expand(2**25), "fc.bias": torch.zeros(10)}, path)
    loaded = torch.load(path)["fc.weight"]
    assert loaded.shape == (2**25,) and loaded.stride() == (0,), (loaded.shape, loaded.stride())
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main(sys.argv[1])
