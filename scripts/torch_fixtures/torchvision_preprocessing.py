"""Writes the fixtures of towers-data's torchvision preprocessing test
(crates/data/tests/torchvision_preprocessing.rs): a few images, and what torchvision and Pillow
make of them, as torchvision's ImageNet datasets load them (`Image.open(f).convert("RGB")`).

    /work/venv/bin/python scripts/torch_fixtures/torchvision_preprocessing.py \
        crates/data/tests/data/torchvision

(torch, torchvision and Pillow from PyPI.) OUT_DIR gets:
- the images: landscape.jpg (200x150, quality 90), grey.jpg (160x120, greyscale), portrait.png
  (121x183) and small.png (50x40), stripes and rings finer than the resizes keep, so that
  Pillow's antialiasing shows;
- eval-RESIZE-CROP-NAME.png: `ResNet50_Weights.IMAGENET1K_V1.transforms()`'s resize and
  center crop (`ImageClassification` with these sizes), the 8-bit image before it becomes a
  tensor, for every image at 73/64 and for landscape.jpg at 256/224;
- crop-TOP-LEFT-HEIGHT-WIDTH.png: `F.resized_crop(landscape, ..., [64, 64], BILINEAR,
  antialias=True)`, the deterministic part of `RandomResizedCrop`;
- cmyk.jpg (64x48, quality 95, CMYK as Pillow writes it: Adobe's inverted inks) and
  cmyk-rgb.png, Pillow's `convert("RGB")` of it;
- expected.json: for landscape.jpg at 256/224, the normalized tensor's per-channel sums and
  16 of its values; the sizes torchvision's `Resize(256)` gives some image sizes (its `_compute_resized_output_size`, which `F.resize` calls); versions.
"""
import json
import os
import sys

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F
from torchvision.transforms._presets import ImageClassification

CROPS = [(10, 37, 100, 111), (0, 0, 150, 200), (97, 150, 20, 13), (3, 5, 140, 60)]
SIZES = [(375, 500), (457, 301), (1, 1000), (999, 1000), (1000, 999), (333, 333), (7, 3)]
PLACES = [(c, y, x) for c in range(3) for (y, x) in [(0, 0), (17, 200), (111, 5), (223, 223), (100, 101)]][:16]


def pattern(height, width, seed):
    """Rings and stripes above the resizes' cut-off, over a colour gradient, with a little noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    rings = np.sin(np.hypot(y - height / 3, x - width / 2) * 1.3)
    stripes = np.sin(x * 2.1 + y * 0.4)
    channels = [
        128 + 60 * rings + 30 * y / height,
        128 + 50 * stripes - 40 * x / width,
        90 + 40 * rings * stripes + 80 * (x + y) / (width + height),
    ]
    image = np.stack(channels, axis=-1) + rng.normal(0, 4, (height, width, 3))
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    path = lambda name: os.path.join(out_dir, name)
    Image.fromarray(pattern(150, 200, 1)).save(path("landscape.jpg"), quality=90)
    Image.fromarray(pattern(120, 160, 2)[:, :, 0]).save(path("grey.jpg"), quality=90)
    Image.fromarray(pattern(183, 121, 3)).save(path("portrait.png"))
    Image.fromarray(pattern(40, 50, 4)).save(path("small.png"))
    load = lambda name: Image.open(path(name)).convert("RGB")
    names = ["landscape.jpg", "grey.jpg", "portrait.png", "small.png"]
    for name in names:
        for resize, crop in [(73, 64)] + ([(256, 224)] if name == "landscape.jpg" else []):
            image = F.resize(load(name), [resize], InterpolationMode.BILINEAR, antialias=True)
            image = F.center_crop(image, [crop])
            image.save(path(f"eval-{resize}-{crop}-{name.split('.')[0]}.png"))
    for top, left, height, width in CROPS:
        crop = F.resized_crop(load("landscape.jpg"), top, left, height, width, [64, 64],
                              InterpolationMode.BILINEAR, antialias=True)
        crop.save(path(f"crop-{top}-{left}-{height}-{width}.png"))
    y, x = np.mgrid[0:48, 0:64]
    inks = np.stack([x * 4 % 256, y * 5 % 256, (x + y) * 2 % 256, x * y % 256], axis=-1)
    Image.fromarray(inks.astype(np.uint8), "CMYK").save(path("cmyk.jpg"), quality=95)
    Image.open(path("cmyk.jpg")).convert("RGB").save(path("cmyk-rgb.png"))
    preset = ImageClassification(crop_size=224, resize_size=256)
    tensor = preset(load("landscape.jpg"))
    expected = {
        "landscape_256_224": {
            "channel_sums": tensor.double().sum(dim=(1, 2)).tolist(),
            "values": [[c, y, x, tensor[c, y, x].item()] for (c, y, x) in PLACES],
        },
        "resize_256_sizes": [
            [h, w, *F._compute_resized_output_size((h, w), [256])] for (h, w) in SIZES
        ],
        "versions": {
            "torch": torch.__version__,
            "torchvision": torchvision.__version__,
            "pillow": Image.__version__,
        },
    }
    with open(path("expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(json.dumps(expected["versions"]))


if __name__ == "__main__":
    main(*sys.argv[1:])
