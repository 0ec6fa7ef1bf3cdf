"""Writes torchvision ResNet-50 and ResNet-18 state dicts (random weights, 1000 classes) and
torchvision's logits for them, for the test that our import of torchvision's weights gives
torchvision's outputs (crates/models/tests/torchvision_resnet.rs). The state dicts (about 100
and 45 MB) are not committed; their key lists are.

    /work/venv/bin/python scripts/torch_fixtures/resnet_torchvision.py OUT_DIR [KEY_LIST_DIR]
    TOWERS_TORCHVISION_RESNET=OUT_DIR cargo test -p towers-models --test integration torchvision_resnet

(torch and torchvision from PyPI.) Each network is `torchvision.models.resnetN(weights=None)`,
then made informative for a test: every batch-norm scale (a tenth of them negative) and offset
random, the classifier weights larger, and the moving statistics those of one batch of random
images (one training pass with momentum 1), so that every input gives logits of a sensible
scale.

OUT_DIR gets: resnet50.pth and resnet18.pth (`torch.save(model.state_dict())`), inputs.f32 (2 x 3
x 224 x 224 f32, NCHW, in [-1, 1]) and expected.json (each network's evaluation-mode logits of
inputs.f32, under its name). KEY_LIST_DIR, when given, gets torchvision_resnet50_keys.txt and
torchvision_resnet18_keys.txt: every state-dict key and its shape, one "KEY<TAB>[SHAPE]" line
each (committed as test data).
"""
import sys

from informative import write_fixtures


def main(out_dir, key_list_dir=None):
    nets = [(name, lambda model: (model.fc,)) for name in ("resnet50", "resnet18")]
    write_fixtures(out_dir, key_list_dir, nets, 224)


if __name__ == "__main__":
    main(*sys.argv[1:])
