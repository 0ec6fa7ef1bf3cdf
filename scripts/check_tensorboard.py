"""Opens train directories with TensorBoard's own reader (EventAccumulator) and prints what
TensorBoard would show: each scalar tag with its steps, the histogram and image tags with
theirs. Exits non-zero when a trainer tag is missing, or when the trainer's scalars do not
all have the same, increasing steps (one continuous curve, resumed runs included).

    cargo run --release --example cifar10 -- --train-dir /tmp/tb_cifar10 --max-steps 100
    cargo run --release --example inception -- --train-dir /tmp/tb_inception
    /work/venv-tf/bin/python scripts/check_tensorboard.py /tmp/tb_cifar10 /tmp/tb_inception
    /work/venv-tf/bin/python scripts/check_tensorboard.py --eval /tmp/cifar10_eval
"""

import sys

from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
    HISTOGRAMS,
    IMAGES,
    SCALARS,
)

TRAIN_SCALARS = ["loss", "total_loss", "tower_0/loss", "learning_rate", "examples_per_sec",
                 "queue/fraction_full"]
EVAL_SCALARS = ["precision_at_1"]


def steps_text(steps):
    return f"{len(steps)} steps {steps[0]}..{steps[-1]}" if steps else "no steps"


def check(run_dir, want_scalars, want_pictures):
    acc = EventAccumulator(run_dir, size_guidance={SCALARS: 0, HISTOGRAMS: 0, IMAGES: 0})
    acc.Reload()
    tags = acc.Tags()
    ok = True
    print(f"== {run_dir}")
    for tag in tags["scalars"]:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        print(f"scalar    {tag:24} {steps_text(steps)}, last {events[-1].value:.4g}")
    curves = {}
    for tag in want_scalars:
        if tag not in tags["scalars"]:
            print(f"MISSING scalar {tag}")
            ok = False
        else:
            curves[tag] = [e.step for e in acc.Scalars(tag)]
    for tag, steps in curves.items():
        if steps != sorted(set(steps)) or steps != curves[want_scalars[0]]:
            print(f"BROKEN curve {tag}: {steps}")
            ok = False
    histograms = tags["histograms"]
    gradients = [t for t in histograms if t.endswith("/gradients")]
    weights = [t for t in histograms if t not in gradients]
    if histograms:
        print(f"histogram {len(weights)} weights, {len(gradients)} gradients")
    for tag in weights[:2] + gradients[:2]:
        events = acc.Histograms(tag)
        last = events[-1].histogram_value
        print(f"histogram {tag:34} {steps_text([e.step for e in events])}, "
              f"num {last.num:.0f}, min {last.min:.4g}, max {last.max:.4g}, "
              f"{len(last.bucket)} buckets")
    for tag in tags["images"]:
        events = acc.Images(tag)
        last = events[-1]
        print(f"image     {tag:28} {steps_text([e.step for e in events])}, "
              f"{last.width}x{last.height}, {len(last.encoded_image_string)} PNG bytes")
    if want_pictures and not (histograms and gradients and tags["images"]):
        print("MISSING histograms, gradients or images")
        ok = False
    return ok


def main():
    args = sys.argv[1:]
    if args and args[0] == "--eval":
        ok = all(check(d, EVAL_SCALARS, False) for d in args[1:])
    else:
        ok = all(check(d, TRAIN_SCALARS, True) for d in args)
    sys.exit(0 if ok and args else 1)


if __name__ == "__main__":
    main()
