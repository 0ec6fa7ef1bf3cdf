"""Writes crates/models/tests/data/torch_checkpoints/float_only.safetensors and
half.safetensors: the state dict of `state_dict.pth` as conversion scripts save it with
Hugging Face's safetensors, its floating-point tensors only (no batch norm's
`num_batches_tracked`, as `{k: v for k, v in sd.items() if v.is_floating_point()}` leaves
it), and the same in float16, as fp16 exports save it. The readers must read both by
torchvision's names, as the `.pth`.

    /tmp/tfvenv/bin/python scripts/torch_fixtures/converted_safetensors.py crates/models/tests/data/torch_checkpoints
"""
import os
import sys

import torch
from safetensors.torch import save_file


def main(out):
    state_dict = torch.load(os.path.join(out, "state_dict.pth"))
    floats = {k: v.contiguous() for k, v in state_dict.items() if v.is_floating_point()}
    assert not any(k.endswith("num_batches_tracked") for k in floats)
    save_file(floats, os.path.join(out, "float_only.safetensors"))
    save_file({k: v.half() for k, v in floats.items()}, os.path.join(out, "half.safetensors"))


if __name__ == "__main__":
    main(sys.argv[1])
