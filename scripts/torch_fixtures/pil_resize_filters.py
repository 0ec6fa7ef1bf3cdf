"""Writes Pillow's bilinear and bicubic resizes of one small RGB image, for the unit test that
our Pillow resize (crates/data/src/transforms/pil_resize.rs) gives Pillow's bytes with either
filter (torchvision's ResNet weights were evaluated on the first, its EfficientNets' on the
second).

    /tmp/torchenv/bin/python scripts/torch_fixtures/pil_resize_filters.py crates/data/tests/data/pil_resize_filters.txt

The image is 23 rows of 31 RGB pixels whose i-th byte is `i * 37 % 251` (the test's `image`).
Each line of the output: `FILTER<TAB>HEIGHT<TAB>WIDTH<TAB>BYTES` (hex, row by row).
"""
import sys

import numpy as np
import PIL
from PIL import Image

SIZES = [(23, 12), (9, 31), (40, 17), (9, 20), (11, 64), (5, 28), (7, 7)]


def main(out):
    height, width = 23, 31
    values = (np.arange(height * width * 3) * 37 % 251).astype(np.uint8)
    image = Image.fromarray(values.reshape(height, width, 3), "RGB")
    with open(out, "w") as f:
        for name, method in [("bilinear", Image.BILINEAR), ("bicubic", Image.BICUBIC)]:
            for h, w in SIZES:
                resized = np.asarray(image.resize((w, h), method))
                f.write(f"{name}\t{h}\t{w}\t{resized.tobytes().hex()}\n")
    print(f"Pillow {PIL.__version__}: {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
