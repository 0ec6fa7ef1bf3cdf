"""Writes small JPEGs (by TensorFlow and by Pillow) and TensorFlow's decoded pixels of each, for
the test that our TF-exact JPEG decoding equals `tf.io.decode_jpeg(..., channels=3)` bit for bit
(crates/data/tests/tf_jpeg.rs).

    /work/venv/bin/python scripts/tf_fixtures/jpeg_decode.py crates/data/tests/data/tf_jpeg

(tensorflow-cpu and pillow from PyPI.) OUT_DIR gets, for each case NAME:
  NAME.jpg           the JPEG
  NAME.fast.rgb      tf.io.decode_jpeg(jpeg, channels=3), TF's default dct_method "" (raw u8, HWC)
  NAME.accurate.rgb  the same with dct_method="INTEGER_ACCURATE"
and manifest.txt: one line "NAME WIDTH HEIGHT" per case. The script also checks that TF's
default decoding equals dct_method="INTEGER_FAST" (the default our decoder follows).
"""
import io
import os
import sys

import numpy as np
import tensorflow as tf
from PIL import Image

WIDTH, HEIGHT = 32, 24


def picture(width, height, seed):
    """A photo-like RGB picture: smooth colour gradients, a sharp edge and noise, so that the
    IDCT and the chroma upsampling both matter."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 128 + 100 * np.sin(x / 5.0 + seed)
    g = 128 + 100 * np.cos(y / 4.0 - seed)
    b = np.where(x + y > (width + height) / 2, 220.0, 30.0)
    rgb = np.stack([r, g, b], axis=-1) + rng.normal(0, 12, (height, width, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def tf_jpeg(rgb, **options):
    return tf.io.encode_jpeg(rgb, **options).numpy()


def pil_jpeg(image, **options):
    out = io.BytesIO()
    image.save(out, format="JPEG", **options)
    return out.getvalue()


def without_adobe_marker(jpeg):
    """`jpeg` with its APP14 "Adobe" segment cut out: a CMYK JPEG libjpeg reads as plain
    (non-inverted) CMYK, TF's other CMYK branch."""
    pos = 2
    while jpeg[pos] == 0xFF and jpeg[pos + 1] != 0xDA:
        length = int.from_bytes(jpeg[pos + 2 : pos + 4], "big")
        if jpeg[pos + 1] == 0xEE and jpeg[pos + 4 : pos + 9] == b"Adobe":
            return jpeg[:pos] + jpeg[pos + 2 + length :]
        pos += 2 + length
    raise ValueError("no Adobe marker")


def cases():
    rgb = picture(WIDTH, HEIGHT, 1)
    odd = picture(WIDTH + 1, HEIGHT + 1, 2)
    grey = picture(WIDTH, HEIGHT, 3)[..., :1]
    pil_rgb = Image.fromarray(picture(WIDTH, HEIGHT, 4))
    cmyk = Image.fromarray(
        np.concatenate([picture(WIDTH, HEIGHT, 5), picture(WIDTH, HEIGHT, 6)[..., :1]], -1),
        mode="CMYK",
    )
    pil_cmyk = pil_jpeg(cmyk, quality=90)
    return {
        "tf_420": tf_jpeg(rgb, quality=75),
        "tf_444": tf_jpeg(rgb, quality=90, chroma_downsampling=False),
        "tf_420_odd_size": tf_jpeg(odd, quality=80),
        "tf_progressive": tf_jpeg(rgb, quality=85, progressive=True),
        "tf_optimized": tf_jpeg(rgb, quality=60, optimize_size=True),
        "tf_grey": tf_jpeg(grey, quality=85, format="grayscale"),
        "pil_420": pil_jpeg(pil_rgb, quality=75, subsampling=2),
        "pil_422": pil_jpeg(pil_rgb, quality=85, subsampling=1),
        "pil_444": pil_jpeg(pil_rgb, quality=95, subsampling=0),
        "pil_progressive": pil_jpeg(pil_rgb, quality=80, progressive=True),
        "pil_restart_markers": pil_jpeg(pil_rgb, quality=80, restart_marker_blocks=2),
        "pil_rgb_colour_space": pil_jpeg(pil_rgb, quality=90, keep_rgb=True),
        "pil_grey": pil_jpeg(pil_rgb.convert("L"), quality=80),
        "pil_cmyk_adobe": pil_cmyk,
        "pil_cmyk_plain": without_adobe_marker(pil_cmyk),
    }


def decode(jpeg, dct_method):
    return tf.io.decode_jpeg(jpeg, channels=3, dct_method=dct_method).numpy()


def check_truncated_is_an_error(jpeg):
    """TF refuses a JPEG whose data ends early (try_recover_truncated=False), as the Rust test
    expects of ours on the same bytes: tf_420.jpg cut in its header (at half its length), in
    its scan (50 bytes short), and of its end marker alone (2 bytes short)."""
    for cut in (len(jpeg) // 2, len(jpeg) - 50, len(jpeg) - 2):
        try:
            decode(jpeg[:cut], "")
        except tf.errors.InvalidArgumentError as e:
            print(f"truncated to {cut} bytes: TF says {e.message!r}")
            continue
        raise AssertionError(f"TF decoded a JPEG truncated to {cut} bytes")


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    manifest = []
    for name, jpeg in cases().items():
        default, fast = decode(jpeg, ""), decode(jpeg, "INTEGER_FAST")
        accurate = decode(jpeg, "INTEGER_ACCURATE")
        assert np.array_equal(default, fast), f"{name}: TF's default is not INTEGER_FAST"
        differs = not np.array_equal(fast, accurate)
        print(f"{name}: {len(jpeg)} bytes, {fast.shape}, fast != accurate: {differs}")
        with open(os.path.join(out_dir, f"{name}.jpg"), "wb") as f:
            f.write(jpeg)
        fast.tofile(os.path.join(out_dir, f"{name}.fast.rgb"))
        accurate.tofile(os.path.join(out_dir, f"{name}.accurate.rgb"))
        manifest.append(f"{name} {fast.shape[1]} {fast.shape[0]}\n")
    with open(os.path.join(out_dir, "manifest.txt"), "w") as f:
        f.writelines(manifest)
    check_truncated_is_an_error(open(os.path.join(out_dir, "tf_420.jpg"), "rb").read())
    print(f"TensorFlow {tf.__version__}, Pillow {Image.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])
