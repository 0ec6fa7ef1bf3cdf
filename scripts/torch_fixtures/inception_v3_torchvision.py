"""Writes a torchvision Inception v3 state dict (random weights, 1000 classes) and torchvision's
logits for it, for the test that our import of torchvision's weights gives torchvision's
outputs (crates/models/tests/torchvision_weights.rs). The state dict is about 100 MB and not
committed; its key list is.

    /work/venv/bin/python scripts/torch_fixtures/inception_v3_torchvision.py OUT_DIR [KEY_LIST]
    TOWERS_TORCHVISION_INCEPTION_V3=OUT_DIR cargo test -p towers-models --test integration torchvision_weights

(torch and torchvision from PyPI.) The network is `torchvision.models.inception_v3(weights=None,
aux_logits=True, transform_input=False, init_weights=True)`, then made informative for a test:
every batch-norm scale (gamma, a tenth of them negative) and offset random, the classifier
weights larger, and the moving statistics those of one batch of random images (one training
pass with momentum 1), so that every input gives logits of a sensible scale.

OUT_DIR gets: inception_v3.pth (`torch.save(model.state_dict())`), inputs.f32 (2 x 3 x 299 x 299
f32, NCHW, in [-1, 1]: what the network body sees after torchvision's `transform_input`) and
expected.json (the evaluation-mode logits of inputs.f32). KEY_LIST, when given, gets every
state-dict key and its shape, one "KEY<TAB>[SHAPE]" line each (committed as test data).
"""
import json
import os
import sys

import torch
import torchvision

from informative import informative

SIZE = 299


def main(out_dir, key_list=None):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    model = torchvision.models.inception_v3(
        weights=None, aux_logits=True, transform_input=False, init_weights=True
    )
    informative(model, generator, (model.fc, model.AuxLogits.fc), SIZE)
    os.makedirs(out_dir, exist_ok=True)
    state = model.state_dict()
    torch.save(state, os.path.join(out_dir, "inception_v3.pth"))
    inputs = torch.rand(2, 3, SIZE, SIZE, generator=generator) * 2 - 1
    inputs.numpy().tofile(os.path.join(out_dir, "inputs.f32"))
    with torch.no_grad():
        logits = model(inputs)
    expected = {"inputs_logits": logits.tolist()}
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"{len(state)} tensors; logits of the inputs: max |logit| {logits.abs().max():.3f}")
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    if key_list:
        with open(key_list, "w") as f:
            for key, tensor in state.items():
                f.write(f"{key}\t{json.dumps(list(tensor.shape))}\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
