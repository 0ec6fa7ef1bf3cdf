"""torchvision's evaluation preprocessing per image, one thread: the peer of `bench_input
--torchvision-eval FILE` (bench/src/torchvision_eval.rs), on the same file.

    python bench/peers/torchvision_eval.py FILE [--make]

`--make` first writes FILE: a 500x375 JPEG (quality 90, ImageNet's typical size) of rings and
stripes over a gradient, the pattern of the preprocessing test's fixtures. Each image is what
torchvision's ImageNet loader and the ResNet weights' preset do: `Image.open(f).convert("RGB")`,
then `ImageClassification(crop_size=224, resize_size=256)` (resize, center crop, to tensor,
normalize). Median of 5 rounds of 200 images, after one round of warm-up.
"""
import io
import statistics
import sys
import time

import numpy as np
import torch
from PIL import Image
from torchvision.transforms._presets import ImageClassification

ROUNDS, IMAGES = 5, 200


def make(path):
    y, x = np.mgrid[0:375, 0:500].astype(np.float64)
    rings = np.sin(np.hypot(y - 125, x - 250) * 1.3)
    stripes = np.sin(x * 2.1 + y * 0.4)
    image = np.stack([128 + 60 * rings + 30 * y / 375, 128 + 50 * stripes - 40 * x / 500,
                      90 + 40 * rings * stripes + 80 * (x + y) / 875], axis=-1)
    Image.fromarray(np.clip(np.rint(image), 0, 255).astype(np.uint8)).save(path, quality=90)


def main(path, *flags):
    if "--make" in flags:
        make(path)
    torch.set_num_threads(1)
    encoded = open(path, "rb").read()
    preset = ImageClassification(crop_size=224, resize_size=256)
    times = []
    for _ in range(ROUNDS + 1):
        started = time.perf_counter()
        for _ in range(IMAGES):
            preset(Image.open(io.BytesIO(encoded)).convert("RGB"))
        times.append((time.perf_counter() - started) / IMAGES)
    print(f"torchvision {__import__('torchvision').__version__}, Pillow {Image.__version__}: "
          f"{statistics.median(times[1:]) * 1e3:.3f} ms/image")


if __name__ == "__main__":
    main(*sys.argv[1:])
