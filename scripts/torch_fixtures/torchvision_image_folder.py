"""Writes the fixture of towers-data's image folder test (crates/data/tests/image_folder.rs): a
folder laid out as PyTorch users' datasets are, and what torchvision's `ImageFolder` and Pillow
make of it.

    /tmp/tfvenv/bin/python scripts/torch_fixtures/torchvision_image_folder.py \
        crates/data/tests/data/image_folder

(torch, torchvision and Pillow from PyPI.) OUT_DIR gets:
- tree/: classes `Z`, `a`, `a b`, `b` and `é` (code-point order puts the capital first and
  the accent last); images nested in sub-folders (`a/sub`, `a/sub b`, `a/sub/deeper`: Python
  sorts the walk by its path strings, so `sub b` comes before `sub/deeper`); every extension
  torchvision takes, in mixed case (JPEG; PNG with alpha, grey with alpha, 16-bit greyscale and
  RGB; BMP of 24 bits and of a palette; PPM, PGM, a PBM bitmap named .pgm; TIFF with LZW, uncompressed grey, CMYK, and
  RGBA with deflate; WebP lossless, lossy, with alpha and animated; GIFs named as images,
  which Pillow opens by their content: a palette with a transparent colour, grey, animated);
  and files it passes over (a GIF named .gif, a text file, `x.jpg.bak`, an image outside any
  class);
- expected.json: `ImageFolder(tree)`'s classes and samples (paths relative to tree/, in its
  order, with their labels), and for each sample the bytes of `pil_loader`'s image
  (`Image.open(f).convert("RGB")`), hex, with its size; versions.
"""
import json
import os
import struct
import sys
import zlib

import numpy as np
import PIL
import torchvision
from PIL import Image
from torchvision.datasets import ImageFolder


def pattern(height, width, seed):
    """A colour gradient with noise: every channel differs, so that a channel mix-up shows."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    channels = [40 + 150 * y / height, 200 - 120 * x / width, 60 + 90 * (x + y) / (width + height)]
    image = np.stack(channels, axis=-1) + rng.normal(0, 20, (height, width, 3))
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def rgb(seed, height=9, width=13):
    return Image.fromarray(pattern(height, width, seed))


def png_rgb16(path, samples):
    """A 16-bit RGB PNG, written by hand: Pillow writes none (it opens them at 8 bits)."""
    height, width, _ = samples.shape
    rows = b"".join(b"\0" + samples[y].astype(">u2").tobytes() for y in range(height))
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def images():
    """(relative path, how to write it); None writes a file that is not an image."""
    grey16 = (pattern(9, 13, 9)[:, :, 0].astype(np.uint16) * 257 + np.arange(13, dtype=np.uint16) * 3)
    rgb16 = pattern(9, 13, 16).astype(np.uint16) * 257 + np.arange(13 * 3, dtype=np.uint16).reshape(13, 3) * 5
    rgba = np.concatenate([pattern(9, 13, 6), pattern(9, 13, 7)[:, :, :1]], axis=-1)
    return [
        ("Z/one.JPEG", lambda p: rgb(1, 16, 24).save(p, "JPEG", quality=90)),
        ("a/x.Bmp", lambda p: rgb(2).save(p, "BMP")),
        ("a/sub/y.png", lambda p: rgb(3).save(p, "PNG")),
        ("a/sub b/z.ppm", lambda p: rgb(4).save(p, "PPM")),
        ("a/sub/deeper/w.pgm", lambda p: rgb(5).convert("L").save(p, "PPM")),
        ("a/sub/deeper/bits.pgm", lambda p: rgb(20).convert("1").save(p, "PPM")),
        ("a/notes.txt", None),
        ("a/anim.gif", lambda p: rgb(5).save(p, "GIF")),
        ("a/x.jpg.bak", lambda p: rgb(5).save(p, "JPEG")),
        ("a b/p.TIF", lambda p: rgb(8).save(p, "TIFF", compression="tiff_lzw")),
        ("a b/q.tiff", lambda p: rgb(10).convert("L").save(p, "TIFF")),
        ("b/alpha.png", lambda p: Image.fromarray(rgba, "RGBA").save(p, "PNG")),
        ("b/grey16.png", lambda p: Image.fromarray(grey16).save(p, "PNG")),
        ("b/rgb16.png", lambda p: png_rgb16(p, rgb16)),
        ("b/lossless.webp", lambda p: rgb(11).save(p, "WEBP", lossless=True)),
        ("b/lossy.webp", lambda p: rgb(12, 16, 24).save(p, "WEBP", quality=80)),
        ("b/cmyk.tif", lambda p: rgb(17).convert("CMYK").save(p, "TIFF")),
        ("b/rgba.tif", lambda p: Image.fromarray(rgba, "RGBA").save(p, "TIFF", compression="tiff_deflate")),
        ("b/rgba.webp", lambda p: Image.fromarray(rgba, "RGBA").save(p, "WEBP", lossless=True)),
        ("b/animated.webp", lambda p: rgb(18).save(p, "WEBP", lossless=True, save_all=True, append_images=[rgb(19)], duration=100)),
        ("b/grey_alpha.png", lambda p: Image.fromarray(rgba, "RGBA").convert("LA").save(p, "PNG")),
        ("b/palette.bmp", lambda p: rgb(13).convert("P", palette=Image.Palette.ADAPTIVE, colors=16).save(p, "BMP")),
        ("b/gif.jpg", lambda p: rgb(21).convert("P", palette=Image.Palette.ADAPTIVE, colors=32).save(p, "GIF", transparency=3)),
        ("b/grey-gif.JPEG", lambda p: rgb(22).convert("L").save(p, "GIF")),
        ("b/animated-gif.png", lambda p: rgb(23).save(p, "GIF", save_all=True, append_images=[rgb(24)], duration=100, interlace=True)),
        ("é/photo.jpeg", lambda p: rgb(14, 12, 10).save(p, "JPEG", quality=95)),
        ("stray.jpg", lambda p: rgb(15).save(p, "JPEG")),
    ]


def main(out_dir):
    tree = os.path.join(out_dir, "tree")
    for relative, write in images():
        path = os.path.join(tree, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if write is None:
            with open(path, "w") as f:
                f.write("not an image\n")
        else:
            write(path)
    folder = ImageFolder(tree)
    samples = []
    for path, label in folder.samples:
        image = folder.loader(path)  # pil_loader: Image.open(f).convert("RGB")
        samples.append({
            "path": os.path.relpath(path, tree),
            "label": label,
            "width": image.width,
            "height": image.height,
            "rgb": image.tobytes().hex(),
        })
    expected = {
        "classes": folder.classes,
        "samples": samples,
        "versions": {"torchvision": torchvision.__version__, "Pillow": PIL.__version__},
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
