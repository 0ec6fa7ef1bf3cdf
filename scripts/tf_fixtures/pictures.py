"""Two smooth RGB pictures of odd sizes with noise, for the fixture scripts that classify
pictures (`inception_v3_checkpoint.py`, `keras_applications.py`)."""
import os

import numpy as np
from PIL import Image


def pictures(rng, out):
    """The two pictures written as `out/images/picture{0,1}.png`; their paths."""
    paths = []
    for i, (h, w) in enumerate([(333, 401), (290, 310)]):
        y, x = np.mgrid[0:h, 0:w] / 50.0
        rgb = np.stack([np.sin(x * (i + 1)), np.cos(y * 1.3), np.sin(x + y)], -1)
        rgb = (rgb + 1) * 127.5 + rng.normal(0, 8, (h, w, 3))
        path = os.path.join(out, "images", f"picture{i}.png")
        Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(path)
        paths.append(path)
    return paths
