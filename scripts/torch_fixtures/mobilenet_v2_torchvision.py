"""Writes a torchvision MobileNetV2 state dict (random weights, 1000 classes) and torchvision's
logits for it, for the test that our import of torchvision's weights gives torchvision's
outputs (crates/models/tests/torchvision_mobilenet.rs). The state dict (about 14 MB) is not
committed; its key list is.

    /tmp/torchenv/bin/python scripts/torch_fixtures/mobilenet_v2_torchvision.py OUT_DIR [KEY_LIST_DIR]
    TOWERS_TORCHVISION_MOBILENET_V2=OUT_DIR cargo test -p towers-models --test integration torchvision_mobilenet

(torch and torchvision from PyPI.) The network is `torchvision.models.mobilenet_v2(weights=None)`,
made informative as the other torchvision fixtures (`informative.py`). OUT_DIR gets
mobilenet_v2.pth, inputs.f32 (2 x 3 x 224 x 224 f32, NCHW, in [-1, 1]) and expected.json (the
evaluation-mode logits of inputs.f32, under `mobilenet_v2`); KEY_LIST_DIR, when given,
torchvision_mobilenet_v2_keys.txt (every state-dict key and its shape).
"""
import sys

from informative import write_fixtures


def main(out_dir, key_list_dir=None):
    write_fixtures(out_dir, key_list_dir, [("mobilenet_v2", lambda m: (m.classifier[1],))], 224)


if __name__ == "__main__":
    main(*sys.argv[1:])
