"""Writes torchvision MobileNetV3 Large and Small state dicts (random weights, 1000 classes)
and torchvision's logits for them, for the test that our import of torchvision's weights gives
torchvision's outputs (crates/models/tests/torchvision_mobilenet_v3.rs). The state dicts (about
22 MB and 10 MB) are not committed; their key lists are.

    /tmp/torchenv/bin/python scripts/torch_fixtures/mobilenet_v3_torchvision.py OUT_DIR [KEY_LIST_DIR]
    TOWERS_TORCHVISION_MOBILENET_V3=OUT_DIR cargo test -p towers-models --test integration torchvision_mobilenet_v3

(torch and torchvision from PyPI.) The networks are
`torchvision.models.mobilenet_v3_large(weights=None)` and `mobilenet_v3_small(weights=None)`,
made informative as the other torchvision fixtures (`informative.py`; their squeeze-excitation
convolutions' biases random too, and both of the classifier's `Linear`s spread). OUT_DIR gets
mobilenet_v3_large.pth, mobilenet_v3_small.pth, inputs.f32 (2 x 3 x 224 x 224 f32, NCHW, in
[-1, 1]) and expected.json (the evaluation-mode logits of inputs.f32, under
`mobilenet_v3_large` and `mobilenet_v3_small`); KEY_LIST_DIR, when given,
torchvision_mobilenet_v3_large_keys.txt and torchvision_mobilenet_v3_small_keys.txt (every
state-dict key and its shape).
"""
import sys

from informative import write_fixtures


def main(out_dir, key_list_dir=None):
    # The classifier: Linear, Hardswish, Dropout, Linear.
    classifiers = lambda m: (m.classifier[0], m.classifier[3])  # noqa: E731
    write_fixtures(out_dir, key_list_dir,
                   [("mobilenet_v3_large", classifiers), ("mobilenet_v3_small", classifiers)], 224)


if __name__ == "__main__":
    main(*sys.argv[1:])
