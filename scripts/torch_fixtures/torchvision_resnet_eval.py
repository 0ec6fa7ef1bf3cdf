"""Writes the fixture of towers-train's test that torchvision's ResNet weights evaluate, through
our image folder, preprocessing, import and counting, to the precision torchvision's reference
evaluation gives (crates/train/tests/pretrained.rs, `torchvision_resnet_evaluates_as_torchvision`).
The weights (45 MB) are not committed.

    /work/venv/bin/python scripts/torch_fixtures/torchvision_resnet_eval.py OUT_DIR
    TOWERS_TORCHVISION_RESNET_EVAL=OUT_DIR cargo test -p towers-train --test integration torchvision_resnet

(torch, torchvision and Pillow from PyPI.) OUT_DIR gets:
- resnet18.pth: `torchvision.models.resnet18(weights=None)` made informative (informative.py);
- val/: ImageNet's layout, 1000 class folders `n00000000` ... `n00000999`, of which a few
  hold JPEGs of assorted sizes and aspects (`allow_empty=True` reads it). Each image goes to
  the class the network ranks first (a top-1 hit), third (a top-5 hit only) or 500th (a miss)
  for it, so that the counts below tell a wrong label, crop or weight apart;
- expected.json: torchvision's reference counts (references/classification: `ImageFolder` with
  the weights' preset `ResNet18_Weights.IMAGENET1K_V1.transforms()`, `accuracy(output, target,
  topk=(1, 5))`), the smallest gap between the 5th and 6th logits of any image (the counts can
  only differ from ours where a gap is within our logits' error), and versions.
"""
import json
import os
import sys

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torchvision.datasets import ImageFolder
from torchvision.models import ResNet18_Weights

from informative import informative

CLASSES = 1000
# (height, width) of the images: landscape, portrait, square, small, and one under the crop.
SIZES = [(375, 500), (500, 333), (256, 256), (240, 320), (300, 300), (180, 260), (333, 500),
         (480, 640), (224, 300), (400, 280), (260, 260), (200, 210)]
# The rank (0-based) of the class each image is filed under, in turn.
RANKS = [0, 2, 499]


def picture(height, width, seed):
    """A smooth colour field with shapes and noise, so that the network's outputs vary."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    waves = [np.sin(x / rng.uniform(8, 40) + rng.uniform(0, 6)) + np.cos(y / rng.uniform(8, 40))
             for _ in range(3)]
    image = np.stack([128 + 60 * w for w in waves], axis=-1) + rng.normal(0, 12, (height, width, 3))
    cy, cx, r = rng.uniform(0.3, 0.7) * height, rng.uniform(0.3, 0.7) * width, min(height, width) / 4
    image[(y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.uniform(0, 255, 3)
    return Image.fromarray(np.clip(np.rint(image), 0, 255).astype(np.uint8))


def main(out_dir):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(2)
    model = torchvision.models.resnet18(weights=None)
    informative(model, generator, (model.fc,), 224)
    torch.save(model.state_dict(), os.path.join(out_dir, "resnet18.pth"))
    preset = ResNet18_Weights.IMAGENET1K_V1.transforms()
    val = os.path.join(out_dir, "val")
    for c in range(CLASSES):
        os.makedirs(os.path.join(val, f"n{c:08d}"), exist_ok=True)
    for i, (height, width) in enumerate(SIZES):
        image = picture(height, width, i)
        path = os.path.join(out_dir, "staging.jpg")
        image.save(path, quality=90)
        with torch.no_grad():
            logits = model(preset(Image.open(path).convert("RGB"))[None])[0]
        label = int(logits.argsort(descending=True)[RANKS[i % len(RANKS)]])
        os.replace(path, os.path.join(val, f"n{label:08d}", f"image_{i:02d}.jpg"))

    dataset = ImageFolder(val, transform=preset, allow_empty=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=5)
    correct, gap = {1: 0, 5: 0}, float("inf")
    with torch.no_grad():
        for images, targets in loader:
            output = model(images)
            top = output.topk(6, dim=1)
            gap = min(gap, float((top.values[:, 4] - top.values[:, 5]).min()))
            for k in correct:
                correct[k] += int((top.indices[:, :k] == targets[:, None]).any(dim=1).sum())
    expected = {
        "examples": len(dataset),
        "correct_at_1": correct[1],
        "correct_at_5": correct[5],
        "smallest_top5_gap": gap,
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                     "Pillow": PIL.__version__},
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(expected)


if __name__ == "__main__":
    main(*sys.argv[1:])
