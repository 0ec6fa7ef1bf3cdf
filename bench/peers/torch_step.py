"""PyTorch's training step on the nets of `bench_models`: the CIFAR-10 net (batch 128, 24x24),
Inception v3 (batch 32, 299x299, auxiliary head on), ResNet-50, ResNet-18 and EfficientNet-B0
(batch 32, 224x224, torchvision's), forward + backward + plain SGD, in f32 and under bf16 autocast, on a CUDA GPU or
the CPU.

The peer of `bench_models`' "train step ms/image" column where TensorFlow is not at hand (a GPU
machine with PyTorch only, or a CPU with AMX, where PyTorch's oneDNN uses the tiles):

    python bench/peers/torch_step.py --device cuda --reps 20
    TOWERS_BENCH_DEVICE=cuda:0 cargo run --release -p towers-bench --features cuda --bin bench_models 20

Prints one line per net and precision: ms/image (the mean of the timed steps after three
warm-ups, and the fastest).
"""

import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class Cifar10Net(nn.Module):
    """TF's CIFAR-10 tutorial net: two 5x5 convolutions with max pools and local response
    normalization, then dense layers of 384 and 192 units."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 5, padding=2)
        self.conv2 = nn.Conv2d(64, 64, 5, padding=2)
        # TF's lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75): PyTorch divides alpha by
        # the window's size (9), so the same normalization has alpha 0.001.
        self.lrn = nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0)
        self.local3 = nn.Linear(64 * 6 * 6, 384)
        self.local4 = nn.Linear(384, 192)
        self.logits = nn.Linear(192, 10)

    def forward(self, x):
        x = self.lrn(F.max_pool2d(F.relu(self.conv1(x)), 3, 2, padding=1))
        x = F.max_pool2d(self.lrn(F.relu(self.conv2(x))), 3, 2, padding=1)
        x = F.relu(self.local3(x.flatten(1)))
        return self.logits(F.relu(self.local4(x)))


def cifar10(device):
    images = torch.rand(128, 3, 24, 24, device=device) * 2 - 1
    labels = torch.arange(128, device=device) % 10
    net = Cifar10Net().to(device)
    return net, images, lambda out: F.cross_entropy(out, labels)


def inception(device):
    images = torch.rand(32, 3, 299, 299, device=device) * 2 - 1
    labels = torch.arange(32, device=device) % 1001
    net = torchvision.models.inception_v3(
        weights=None, aux_logits=True, init_weights=False, num_classes=1001
    ).to(device)
    # TF-slim's loss: the logits' cross entropy plus 0.4 of the auxiliary head's.
    loss = lambda out: F.cross_entropy(out.logits, labels) + 0.4 * F.cross_entropy(
        out.aux_logits, labels
    )
    return net, images, loss


def resnet(name):
    """torchvision's network `name` (a ResNet, EfficientNet-B0; 1000 classes) on random
    images, cross-entropy."""

    def build(device):
        images = torch.rand(32, 3, 224, 224, device=device) * 2 - 1
        labels = torch.arange(32, device=device) % 1000
        net = getattr(torchvision.models, name)(weights=None).to(device)
        return net, images, lambda out: F.cross_entropy(out, labels)

    return build


def time_steps(build, device, precision, reps):
    net, images, loss_of = build(device)
    net.train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_of(net(images))
        loss.backward()
        optimizer.step()

    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    per_image = [1000 * t / images.shape[0] for t in times]
    return sum(per_image) / len(per_image), min(per_image)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument(
        "--models", default="cifar10,inception", help="of cifar10, inception, resnet50, resnet18, efficientnet_b0, mobilenet_v3_large"
    )
    parser.add_argument("--precisions", default="f32,bf16")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        print(f"device: {torch.cuda.get_device_name(device)}")
    else:
        torch.set_num_threads(len(os.sched_getaffinity(0)))  # taskset's cores
        print(f"device: CPU, {torch.get_num_threads()} threads")
    print(f"torch {torch.__version__}, {args.reps} timed steps after 3 warm-ups")
    print(f"{'model':<12} {'precision':<9} {'batch':>5} {'train step ms/image':>20} {'fastest':>8}")
    builds = {
        "cifar10": (cifar10, 128),
        "inception": (inception, 32),
        "resnet50": (resnet("resnet50"), 32),
        "resnet18": (resnet("resnet18"), 32),
        "efficientnet_b0": (resnet("efficientnet_b0"), 32),
        "mobilenet_v3_large": (resnet("mobilenet_v3_large"), 32),
    }
    for name in args.models.split(","):
        build, batch = builds[name]
        for precision in args.precisions.split(","):
            mean, fastest = time_steps(build, device, precision, args.reps)
            print(f"{name:<12} {precision:<9} {batch:>5} {mean:>20.3f} {fastest:>8.3f}")


if __name__ == "__main__":
    main()
