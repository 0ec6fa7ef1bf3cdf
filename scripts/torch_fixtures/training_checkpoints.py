"""Writes the state dict of a tiny ResNet-shaped module (`conv1`, `bn1`, `fc`) the ways
PyTorch training code saves one, for the test that `TorchSource` finds it in each
(crates/models/tests/torch_checkpoints.rs). Each file is a few kB and committed.

    /tmp/torchenv/bin/python scripts/torch_fixtures/training_checkpoints.py crates/models/tests/data/torch_checkpoints

(torch from PyPI.) The files, each written by `torch.save`:
- state_dict.pth: `model.state_dict()`, the reference;
- finetuned_resnet18_v2.pth: the same under a name of 21 characters before `.pth`, which
  makes a zip that the zip crate (9.8, 9.9) misreads (crates/models/src/weights/
  torch_zip_copy.rs);
- imagenet_example.pth.tar: PyTorch's ImageNet example (examples/imagenet/main.py,
  `save_checkpoint`): the model wrapped in `DataParallel` (keys `module.`), under
  `state_dict`, beside the epoch, the best precision, the optimizer's and the scheduler's
  state;
- legacy_imagenet_example.pth.tar: the same in the format `torch.save` wrote before
  PyTorch 1.6 (`_use_new_zipfile_serialization=False`), as older checkpoints are;
- torchvision_reference.pth: torchvision's reference scripts (references/classification/
  train.py): under `model`, beside the optimizer, the scheduler, the epoch and the
  `argparse.Namespace` of the run's arguments;
- tutorial.pt: PyTorch's tutorial "Saving and loading a general checkpoint":
  `model_state_dict`, `optimizer_state_dict`, the epoch and the loss;
- compiled.pt: the state dict of `torch.compile(model)` (keys `_orig_mod.`);
- lightning.ckpt: a dictionary shaped as Lightning saves one (Lightning is not installed
  here): the LightningModule's state dict, its model under the attribute `model`, under
  `state_dict`, beside `epoch`, `global_step`, `optimizer_states` and
  `pytorch-lightning_version`;
- ema.pth.tar: timm's training checkpoint (timm/utils/checkpoint_saver.py): `state_dict`
  and `state_dict_ema` (the moving average, other values) beside the optimizer's state.
expected.json: the reference's tensors, as lists, under their keys.
"""
import argparse
import json
import os
import sys

import torch
from torch import nn


class Tiny(nn.Module):
    """ResNet's first convolution and batch norm and its classifier, at a few channels."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(2)
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x))).mean((2, 3))
        return self.fc(torch.cat([x, x[:, :1]], 1))


class LightningLike(nn.Module):
    """A LightningModule keeps the network under an attribute; `model` is the usual one."""

    def __init__(self, model):
        super().__init__()
        self.model = model


def trained(model):
    """`model` after one SGD step with momentum (so that the optimizer has state, and the
    batch norm's statistics moved), and its optimizer and scheduler."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 30)
    model(torch.randn(4, 3, 5, 5)).sum().backward()
    optimizer.step()
    scheduler.step()
    return optimizer, scheduler


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    out = lambda name: os.path.join(out_dir, name)
    torch.manual_seed(0)
    model = Tiny()
    optimizer, scheduler = trained(model)
    torch.save(model.state_dict(), out("state_dict.pth"))
    torch.save(model.state_dict(), out("finetuned_resnet18_v2.pth"))
    wrapped = nn.DataParallel(model)
    imagenet_example = {
        "epoch": 3,
        "arch": "resnet18",
        "state_dict": wrapped.state_dict(),
        "best_acc1": torch.tensor(12.5),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }
    torch.save(imagenet_example, out("imagenet_example.pth.tar"))
    torch.save(
        imagenet_example,
        out("legacy_imagenet_example.pth.tar"),
        _use_new_zipfile_serialization=False,
    )
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "lr_scheduler": scheduler.state_dict(),
            "epoch": 3,
            "args": argparse.Namespace(model="resnet18", lr=0.1, epochs=90),
        },
        out("torchvision_reference.pth"),
    )
    torch.save(
        {
            "epoch": 3,
            "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "loss": 0.25,
        },
        out("tutorial.pt"),
    )
    torch.save(torch.compile(model).state_dict(), out("compiled.pt"))
    torch.save(
        {
            "epoch": 3,
            "global_step": 120,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": LightningLike(model).state_dict(),
            "optimizer_states": [optimizer.state_dict()],
            "lr_schedulers": [scheduler.state_dict()],
        },
        out("lightning.ckpt"),
    )
    average = Tiny()
    torch.save(
        {
            "epoch": 3,
            "arch": "resnet18",
            "state_dict": model.state_dict(),
            "state_dict_ema": average.state_dict(),
            "optimizer": optimizer.state_dict(),
        },
        out("ema.pth.tar"),
    )
    expected = {key: value.tolist() for key, value in model.state_dict().items()}
    with open(out("expected.json"), "w") as f:
        json.dump(expected, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
