"""TensorFlow and burn-towers in one sitting, f32 and bf16, on the CIFAR-10 net's training step
and Inception v3's, with `--resnet` ResNet-50's against TF Keras and PyTorch (torchvision,
oneDNN), and with `--resnet-v2` ResNet50V2's, `--mobilenet-v2` MobileNetV2's and
`--efficientnet-b0` EfficientNet-B0's against TF Keras: each pair run back to back, the pairs repeated `--rounds` times, the ratios printed
(ours / the peer in examples per second: above 1 is faster).

Run by hand with TensorFlow installed (never in CI), on an otherwise idle machine, after
`cargo build --release -p towers-bench --bin bench_step --bin bench_models`:

    python bench/peers/side_by_side.py [--rounds 2] [--skip-inception] [--resnet] [--resnet-v2] [--mobilenet-v2] [--efficientnet-b0] [--precisions f32]

Each side runs one precision per process, as training does: ours `bench_step REPS f32|bf16`
(the whole step alone) and `bench_models REPS
inception|resnet50|resnet50-keras|resnet50v2|mobilenet_v2|efficientnet_b0 f32|bf16` (`resnet50-keras`: ResNet-50 in Keras's layout, the network TF Keras times); TF
`tf_cifar10_step.py --whole-step-only --precision` and `tf_keras_step.py --model --precision`
(bf16: Keras's `mixed_bfloat16`); PyTorch `torch_step.py --models resnet50 --precisions` (bf16:
autocast). (Ours alternating precisions call by call in one process, after one
warm-up step, ran its f32 calls 3-8% slower after bf16 ones: bench/HISTORY.md, 2026-11-27.)
Record the CPU (`lscpu`) with the figures: the ratios depend on it. `--precisions f32` leaves
bf16 out (on a CPU without bf16 instructions TF's and PyTorch's bf16 steps take ten times as
long).
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "bench" / "peers"
BINARIES = ROOT / "target" / "release"
# The precisions each side runs (`--precisions`).
PRECISIONS = ("f32", "bf16")


def run(command):
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return out


def number(pattern, text):
    match = re.search(pattern, text, re.MULTILINE)
    if not match:
        sys.exit(f"no `{pattern}` in:\n{text}")
    return float(match.group(1))


def cifar_round(reps):
    """ms per step: TF f32, TF bf16, ours f32, ours bf16."""
    tf = {
        p: number(
            r"^whole step: forward\+backward\+SGD\s+([\d.]+)",
            run([sys.executable, PEERS / "tf_cifar10_step.py", "--whole-step-only",
                 "--precision", p, "--reps", str(reps)]),
        )
        for p in PRECISIONS
    }
    ours = {
        p: number(
            rf"^whole step \({p}\): fwd\+bwd\+SGD\s+([\d.]+)",
            run([BINARIES / "bench_step", str(reps), p]),
        )
        for p in PRECISIONS
    }
    return tf, ours


def tf_keras(model, reps):
    """ms per image of TF Keras's `model` train step (`tf_keras_step.py --model`), each precision."""
    return {
        p: number(
            r"^train step ms/image ([\d.]+)",
            run([sys.executable, PEERS / "tf_keras_step.py", "--model", model,
                 "--precision", p, "--reps", str(reps)]),
        )
        for p in PRECISIONS
    }


def ours_per_image(model, row, reps):
    """ms per image of our `model` train step (`bench_models`' row `row`), each precision."""
    return {
        p: number(
            rf"^{row} \({p}\)\s+\d+\s+[\d.]+\s+([\d.]+)",
            run([BINARIES / "bench_models", str(reps), model, p]),
        )
        for p in PRECISIONS
    }


def inception_round(reps):
    """ms per image of a train step: TF's and ours, each precision."""
    return tf_keras("inception", reps), ours_per_image("inception", "Inception v3, 299x299", reps)


def resnet_round(reps):
    """ms per image of ResNet-50's train step: TF, PyTorch and ours, each f32 and bf16."""
    tf = tf_keras("resnet50", reps)
    torch = {
        p: number(
            rf"^resnet50\s+{p}\s+\d+\s+([\d.]+)",
            run([sys.executable, PEERS / "torch_step.py", "--device", "cpu", "--models",
                 "resnet50", "--precisions", p, "--reps", str(reps)]),
        )
        for p in PRECISIONS
    }
    ours = {
        (layout, p): ms
        for layout, model, row in [("torchvision", "resnet50", "ResNet-50, 224x224"),
                                   ("keras", "resnet50-keras", "ResNet-50 Keras, 224x224")]
        for p, ms in ours_per_image(model, row, reps).items()
    }
    return tf, torch, ours


def keras_net_round(model, row, reps):
    """ms per image of keras.applications' `model`'s train step (`tf_keras_step.py --model`,
    `bench_models` row `row`): TF Keras's and ours, each precision."""
    return tf_keras(model, reps), ours_per_image(model, row, reps)


# The networks timed against TF Keras alone: flag, name, `--model`, our `bench_models` row.
KERAS_NETS = [
    ("resnet_v2", "ResNet50V2", "resnet50v2", "ResNet50V2, 224x224"),
    ("mobilenet_v2", "MobileNetV2", "mobilenet_v2", "MobileNetV2 Keras, 224x224"),
    ("efficientnet_b0", "EfficientNet", "efficientnet_b0", "EfficientNet-B0 Keras, 224x224"),
]


def report_resnet(tf, torch, ours):
    for p in PRECISIONS:
        mine, keras = ours[("torchvision", p)], ours[("keras", p)]
        print(f"ResNet-50  {p:<5} TF {tf[p]:>8.2f} ms/image   PyTorch {torch[p]:>8.2f} ms/image   "
              f"ours {mine:>8.2f} ms/image   ours/TF {tf[p] / mine:.2f}x   "
              f"ours/PyTorch {torch[p] / mine:.2f}x")
        print(f"ResNet-50  {p:<5} ours in Keras's layout (TF's network) {keras:>8.2f} ms/image   "
              f"ours/TF {tf[p] / keras:.2f}x")
    if len(PRECISIONS) == 2:
        mine = {p: ours[("torchvision", p)] for p in PRECISIONS}
        print(f"ResNet-50  bf16 / f32: ours {mine['f32'] / mine['bf16']:.2f}x, "
              f"TF {tf['f32'] / tf['bf16']:.2f}x, PyTorch {torch['f32'] / torch['bf16']:.2f}x")


def report(name, unit, tf, ours):
    for p in PRECISIONS:
        print(f"{name:<10} {p:<5} TF {tf[p]:>9.2f} {unit}   ours {ours[p]:>9.2f} {unit}   "
              f"ours/TF {tf[p] / ours[p]:.2f}x")
    if len(PRECISIONS) == 2:
        print(f"{name:<10} ours bf16 / ours f32 {ours['f32'] / ours['bf16']:.2f}x, "
              f"TF bf16 / TF f32 {tf['f32'] / tf['bf16']:.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-inception", action="store_true")
    parser.add_argument("--skip-cifar10", action="store_true")
    parser.add_argument("--resnet", action="store_true", help="ResNet-50 against TF and PyTorch too")
    parser.add_argument("--resnet-v2", action="store_true", help="ResNet50V2 against TF Keras too")
    parser.add_argument("--mobilenet-v2", action="store_true", help="MobileNetV2 against TF Keras")
    parser.add_argument("--efficientnet-b0", action="store_true",
                        help="EfficientNet-B0 against TF Keras")
    parser.add_argument("--precisions", default="f32,bf16", help="f32, bf16 or both")
    args = parser.parse_args()
    global PRECISIONS
    PRECISIONS = tuple(args.precisions.split(","))
    print(run(["lscpu"]).splitlines()[[l.startswith("Model name") for l in run(["lscpu"]).splitlines()].index(True)])
    for r in range(args.rounds):
        print(f"round {r + 1}")
        if not args.skip_cifar10:
            report("CIFAR-10", "ms/step ", *cifar_round(15))
        if not args.skip_inception:
            report("Inception", "ms/image", *inception_round(2))
        if args.resnet:
            report_resnet(*resnet_round(3))
        for flag, name, model, row in KERAS_NETS:
            if getattr(args, flag):
                report(name, "ms/image", *keras_net_round(model, row, 3))


if __name__ == "__main__":
    main()
