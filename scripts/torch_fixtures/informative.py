"""What the torchvision fixture scripts share: a randomly initialized network made informative
for a test of its outputs, and the files of such networks' state dicts and logits."""

import json
import os

import torch
import torchvision


def informative(model, generator, classifiers, size):
    """Random batch-norm scales (a tenth of them negative) and offsets, random convolution
    biases (where a convolution has one: EfficientNet's squeeze-excitation), larger weights for
    the `classifiers` (Linear layers), and moving statistics of one batch of random
    `size`x`size` images (a training pass with momentum 1, dropout and stochastic depth off), so
    that every input gives logits of a sensible scale. Leaves `model` in evaluation mode."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                gamma = torch.rand(module.num_features, generator=generator) + 0.5
                sign = torch.rand(module.num_features, generator=generator) < 0.1
                module.weight.copy_(torch.where(sign, -gamma, gamma))
                module.bias.normal_(0.0, 0.2, generator=generator)
                module.momentum = 1.0
            if isinstance(module, torch.nn.Conv2d) and module.bias is not None:
                module.bias.normal_(0.0, 0.1, generator=generator)
        for fc in classifiers:
            fc.weight.normal_(0.0, 0.05, generator=generator)
            fc.bias.normal_(0.0, 0.1, generator=generator)
        model.train()
        # The statistics of the network that infers: EfficientNet's stochastic depth would
        # drop whole samples' residual branches.
        for module in model.modules():
            if isinstance(module, (torch.nn.Dropout, torchvision.ops.StochasticDepth)):
                module.eval()
        model(torch.rand(8, 3, size, size, generator=generator) * 2 - 1)
    model.eval()


def write_fixtures(out_dir, key_list_dir, nets, size):
    """For each of `nets` (torchvision's builder name, and a function of the model giving its
    classifier `Linear`s), `NAME.pth` (`torch.save(model.state_dict())`) of an informative
    random network; inputs.f32 (2 x 3 x `size` x `size` f32, NCHW, in [-1, 1]) and expected.json
    (each network's evaluation-mode logits of inputs.f32, under its name) in `out_dir`; and in
    `key_list_dir`, when given, torchvision_NAME_keys.txt: every state-dict key and its shape,
    one "KEY<TAB>[SHAPE]" line each (committed as test data)."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    os.makedirs(out_dir, exist_ok=True)
    inputs = torch.rand(2, 3, size, size, generator=generator) * 2 - 1
    inputs.numpy().tofile(os.path.join(out_dir, "inputs.f32"))
    expected = {}
    for name, classifiers in nets:
        model = getattr(torchvision.models, name)(weights=None)
        informative(model, generator, classifiers(model), size)
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
