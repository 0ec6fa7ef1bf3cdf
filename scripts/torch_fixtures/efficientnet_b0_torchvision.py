"""Writes a torchvision EfficientNet-B0 state dict (random weights, 1000 classes) and
torchvision's logits for it, for the test that our import of torchvision's weights gives
torchvision's outputs. The state dict (about 21 MB) is not committed; its key list is.

    /tmp/torchenv/bin/python scripts/torch_fixtures/efficientnet_b0_torchvision.py OUT_DIR [KEY_LIST_DIR]
    TOWERS_TORCHVISION_EFFICIENTNET_B0=OUT_DIR cargo test -p towers-models --test integration torchvision_efficientnet

(torch and torchvision from PyPI.) The network is
`torchvision.models.efficientnet_b0(weights=None)`, made informative as the other torchvision
fixtures (`informative.py`; its squeeze-excitation convolutions' biases random too). OUT_DIR
gets efficientnet_b0.pth, inputs.f32 (2 x 3 x 224 x 224 f32, NCHW, in [-1, 1]) and
expected.json (the evaluation-mode logits of inputs.f32, under `efficientnet_b0`);
KEY_LIST_DIR, when given, torchvision_efficientnet_b0_keys.txt (every state-dict key and its
shape).
"""
import sys

from informative import write_fixtures


def main(out_dir, key_list_dir=None):
    write_fixtures(out_dir, key_list_dir, [("efficientnet_b0", lambda m: (m.classifier[1],))], 224)


if __name__ == "__main__":
    main(*sys.argv[1:])
