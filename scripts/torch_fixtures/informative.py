"""What the torchvision fixture scripts share: a randomly initialized network made informative
for a test of its outputs."""

import torch


def informative(model, generator, classifiers, size):
    """Random batch-norm scales (a tenth of them negative) and offsets, larger weights for the
    `classifiers` (Linear layers), and moving statistics of one batch of random `size`x`size`
    images (a training pass with momentum 1), so that every input gives logits of a sensible
    scale. Leaves `model` in evaluation mode."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                gamma = torch.rand(module.num_features, generator=generator) + 0.5
                sign = torch.rand(module.num_features, generator=generator) < 0.1
                module.weight.copy_(torch.where(sign, -gamma, gamma))
                module.bias.normal_(0.0, 0.2, generator=generator)
                module.momentum = 1.0
        for fc in classifiers:
            fc.weight.normal_(0.0, 0.05, generator=generator)
            fc.bias.normal_(0.0, 0.1, generator=generator)
        model.train()
        model(torch.rand(8, 3, size, size, generator=generator) * 2 - 1)
    model.eval()
