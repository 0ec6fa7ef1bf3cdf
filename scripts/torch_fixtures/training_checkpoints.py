"""Writes the state dict of a tiny ResNet-shaped module (`conv1`, `bn1`, `fc`) the ways
PyTorch training code saves one, for the test that `TorchSource` finds it in each
(crates/models/tests/torch_checkpoints.rs). Each file is a few kB and committed.

    /tmp/torchenv/bin/python scripts/torch_fixtures/training_checkpoints.py crates/models/tests/data/torch_checkpoints

(torch, lightning, timm and safetensors from PyPI.) The files, each written by `torch.save`:
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
- lightning.ckpt: Lightning's `Trainer.save_checkpoint` after one training step of a
  LightningModule that keeps the network under the attribute `model`: its state dict under
  `state_dict`, beside the loops' and the optimizer's state;
- ema.pth.tar: timm's training checkpoint (its `CheckpointSaver`, the numbered file):
  `state_dict` and `state_dict_ema` (a moving average, its values moved by 1 so that they
  differ) beside the optimizer's state, the run's arguments and the saver's own.
- model.safetensors: the state dict saved by `safetensors.torch.save_file` with Hugging Face's
  metadata (`format: pt`), as Hugging Face's and timm's hubs ship weights;
- unknown_attribute.pth: the state dict of a module keeping the network under `net`, an
  attribute not looked under (the error says where keys were looked for).
expected.json: the reference's tensors, as lists, under their keys.
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file
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


def lightning_checkpoint(model, path):
    """Trains `model` one step inside a LightningModule (as `self.model`) with Lightning's
    Trainer, and saves the Trainer's checkpoint at `path`."""
    import lightning

    class Classifier(lightning.LightningModule):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def training_step(self, batch, _):
            images, labels = batch
            return nn.functional.cross_entropy(self.model(images), labels)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)

    data = torch.utils.data.TensorDataset(torch.randn(4, 3, 5, 5), torch.tensor([0, 1, 0, 1]))
    trainer = lightning.Trainer(
        max_steps=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Classifier(model), torch.utils.data.DataLoader(data, batch_size=4))
    trainer.save_checkpoint(path)


def timm_checkpoint(model, optimizer, path):
    """timm's checkpoint of `model`, with a moving average of other values, at `path`."""
    import shutil
    import tempfile

    from timm.utils import CheckpointSaver, ModelEmaV3

    average = ModelEmaV3(model)
    with torch.no_grad():
        for value in average.module.state_dict().values():
            value.add_(1)
    args = argparse.Namespace(model="resnet18", lr=0.1)
    with tempfile.TemporaryDirectory() as folder:
        saver = CheckpointSaver(model, optimizer, args, average, checkpoint_dir=folder)
        saver.save_checkpoint(epoch=3, metric=12.5)
        shutil.copy(os.path.join(folder, "checkpoint-3.pth.tar"), path)


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
    save_file(model.state_dict(), out("model.safetensors"), metadata={"format": "pt"})
    holder = nn.Module()
    holder.net = model
    torch.save(holder.state_dict(), out("unknown_attribute.pth"))
    timm_checkpoint(model, optimizer, out("ema.pth.tar"))
    expected = {key: value.tolist() for key, value in model.state_dict().items()}
    with open(out("expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    # Last: the step changes `model`'s weights, which the files above keep as they were.
    lightning_checkpoint(model, out("lightning.ckpt"))
    lightning_expected = {key: value.tolist() for key, value in model.state_dict().items()}
    with open(out("lightning_expected.json"), "w") as f:
        json.dump(lightning_expected, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
