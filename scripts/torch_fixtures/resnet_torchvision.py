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
import json
import os
import sys

import torch
import torchvision

from informative import informative

SIZE = 224


def main(out_dir, key_list_dir=None):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    os.makedirs(out_dir, exist_ok=True)
    inputs = torch.rand(2, 3, SIZE, SIZE, generator=generator) * 2 - 1
    inputs.numpy().tofile(os.path.join(out_dir, "inputs.f32"))
    expected = {}
    for name in ("resnet50", "resnet18"):
        model = getattr(torchvision.models, name)(weights=None)
        informative(model, generator, (model.fc,), SIZE)
        state = model.state_dict()
        torch.save(state, os.path.join(out_dir, f"{name}.pth"))
        with torch.no_grad():
            logits = model(inputs)
        expected[name] = logits.tolist()
        print(f"{name}: {len(state)} tensors; max |logit| {logits.abs().max():.3f}")
        if key_list_dir:
            with open(os.path.join(key_list_dir, f"torchvision_{name}_keys.txt"), "w") as f:
                for key, tensor in state.items():
                    f.write(f"{key}\t{json.dumps(list(tensor.shape))}\n")
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")


if __name__ == "__main__":
    main(*sys.argv[1:])
