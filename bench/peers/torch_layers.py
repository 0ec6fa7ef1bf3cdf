"""PyTorch's peer of `bench_layers`' single layers: the same transposed and 1D convolutions
(shapes, padding, batch 16; a 1D transposed one and a 3D one too), GELUs, a layer norm, an RMS
norm, a group norm, an instance norm, SiLU, Mish, sigmoid, tanh, leaky ReLU, PReLU, dropout,
bilinear upsampling, an LSTM, a GRU, rotary position encoding, SwiGLU, pools, a softmax,
multi-head attention, causal scaled dot-product attention and a transformer encoder layer
(without and with dropout), forward and backward (`sum(y * y)`, the gradients of the input and
the weights), in f32 on the CPU:

    python bench/peers/torch_layers.py --reps 20 [--only NAME]
    cargo run --release -p towers-bench --bin bench_layers 20

Prints one line per layer, named as `bench_layers` names it: ms per call, the mean of the timed
calls after three warm-ups.
"""

import argparse
import time

import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    """`nn.MultiheadAttention` of a sequence to itself, without dropout, as Burn's
    `MhaInput::self_attn`: the context only (Burn's layer returns its weights too, which it
    computes either way)."""

    def __init__(self, d_model, heads):
        super().__init__()
        self.attention = nn.MultiheadAttention(d_model, heads, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


class ScaledAttention(nn.Module):
    """`scaled_dot_product_attention`, causal, of heads `[8, 12, 256, 64]` made of one input as
    `bench_layers` makes them (queries, keys at half, values at a quarter)."""

    def forward(self, x):
        return nn.functional.scaled_dot_product_attention(x, x * 0.5, x * 0.25, is_causal=True)


class AlibiAttention(nn.Module):
    """`scaled_dot_product_attention` of heads `[8, 12, 256, 64]` made as `ScaledAttention`'s,
    with ALiBi's bias as its float mask: head `h`'s slope `2^-(h + 1)` times each key's
    distance from its query, `[1, 12, 256, 256]`."""

    def __init__(self):
        super().__init__()
        places = torch.arange(256, dtype=torch.float32)
        distances = -(places[:, None] - places[None, :]).abs()
        slopes = torch.tensor([2.0 ** -(h + 1) for h in range(12)])
        self.register_buffer("bias", (slopes[:, None, None] * distances)[None])

    def forward(self, x):
        return nn.functional.scaled_dot_product_attention(x, x * 0.5, x * 0.25, attn_mask=self.bias)


class Outputs(nn.Module):
    """A recurrent layer's output sequence alone, as `bench_layers` times Burn's (whose last
    state, returned too, is a part of that sequence and the last cell)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x)[0]


class SwiGlu(nn.Module):
    """Burn's `SwiGlu` (LLaMA's): `silu(x W) * (x V)`, no biases."""

    def __init__(self, d_input, d_output):
        super().__init__()
        self.inner = nn.Linear(d_input, d_output, bias=False)
        self.outer = nn.Linear(d_input, d_output, bias=False)

    def forward(self, x):
        return nn.functional.silu(self.inner(x)) * self.outer(x)


class Rotary(nn.Module):
    """Rotary position encoding as Meta's LLaMA reference code applies it (`apply_rotary_emb`:
    each pair of features a complex number, times its position's `e^(i p θ)`), the table
    precomputed as Burn's layer keeps it."""

    def __init__(self, seq, d_model, theta=10000.0):
        super().__init__()
        freqs = 1.0 / theta ** (torch.arange(0, d_model, 2).float() / d_model)
        angles = torch.outer(torch.arange(seq).float(), freqs)
        self.register_buffer("table", torch.polar(torch.ones_like(angles), angles))

    def forward(self, x):
        pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * self.table).flatten(-2)


def layer_cases():
    """(name, layer, input) for each of `bench_layers`' single layers."""
    for c, side in [(128, 32), (64, 64)]:
        for kernel, padding in [(2, 0), (3, 1)]:
            layer = nn.ConvTranspose2d(
                c, c // 2, kernel, stride=2, padding=padding, output_padding=padding
            )
            name = f"ConvTranspose2d {kernel}x{kernel}/2, {c}->{c // 2} at {side}"
            yield name, layer, torch.rand(16, c, side, side) * 2 - 1
    for c_in, c_out, length, kernel, stride in [
        (64, 64, 1024, 3, 1),
        (128, 128, 256, 5, 1),
        (64, 128, 1024, 3, 2),
    ]:
        # Burn's SAME: (kernel - 1) / 2 on each side for these odd kernels.
        layer = nn.Conv1d(c_in, c_out, kernel, stride=stride, padding=(kernel - 1) // 2)
        name = f"Conv1d {kernel}/{stride}, {c_in}->{c_out} of {length}"
        yield name, layer, torch.rand(16, c_in, length) * 2 - 1
    yield (
        "Conv3d 3x3x3 same, 32->32 of [2, 32, 16, 32, 32]",
        nn.Conv3d(32, 32, 3, padding=1),
        torch.rand(2, 32, 16, 32, 32) * 2 - 1,
    )
    layer = nn.ConvTranspose1d(64, 32, 4, stride=2, padding=1)
    yield "ConvTranspose1d 4/2 pad 1, 64->32 of 1024", layer, torch.rand(16, 64, 1024) * 2 - 1
    for approximate in ["none", "tanh"]:
        name = f"Gelu (approximate: {str(approximate == 'tanh').lower()}) of [32, 256, 768]"
        yield name, nn.GELU(approximate=approximate), torch.rand(32, 256, 768) * 2 - 1
    yield "LayerNorm of [32, 256, 768]", nn.LayerNorm(768), torch.rand(32, 256, 768) * 2 - 1
    # Burn's RmsNorm epsilon, 1e-5 (PyTorch's default is the dtype's machine epsilon).
    yield "RmsNorm of [32, 256, 768]", nn.RMSNorm(768, eps=1e-5), torch.rand(32, 256, 768) * 2 - 1
    for name, layer in [
        ("GroupNorm (32 groups)", nn.GroupNorm(32, 128)),
        ("InstanceNorm", nn.InstanceNorm2d(128, affine=True)),
        ("SiLU", nn.SiLU()),
    ]:
        yield f"{name} of [8, 128, 64, 64]", layer, torch.rand(8, 128, 64, 64) * 2 - 1
    for name, layer in [
        ("Mish", nn.Mish()),
        ("Sigmoid", nn.Sigmoid()),
        ("Tanh", nn.Tanh()),
        ("LeakyRelu (0.01)", nn.LeakyReLU(0.01)),
        ("PRelu (128)", nn.PReLU(128)),
    ]:
        yield f"{name} of [8, 128, 64, 64]", layer, torch.rand(8, 128, 64, 64) * 2 - 1
    yield "Dropout (0.1) of [32, 256, 768]", nn.Dropout(0.1), torch.rand(32, 256, 768) * 2 - 1
    upsample = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    name = "Interpolate2d (bilinear, x2) of [8, 64, 64, 64]"
    yield name, upsample, torch.rand(8, 64, 64, 64) * 2 - 1
    for name, recurrent in [("Lstm", nn.LSTM), ("Gru", nn.GRU)]:
        layer = Outputs(recurrent(256, 256, batch_first=True))
        yield f"{name} (256 -> 256) of [32, 64, 256]", layer, torch.rand(32, 64, 256) * 2 - 1
    name = "RotaryEncoding of [8, 12, 256, 64]"
    yield name, Rotary(256, 64), torch.rand(8, 12, 256, 64) * 2 - 1
    name = "SwiGlu (768 -> 2048) of [8, 256, 768]"
    yield name, SwiGlu(768, 2048), torch.rand(8, 256, 768) * 2 - 1
    yield from pool_cases()
    yield "Softmax of [96, 256, 256]", nn.Softmax(dim=2), torch.rand(96, 256, 256) * 2 - 1
    yield (
        "MultiHeadAttention (768, 12 heads) of [8, 256, 768]",
        SelfAttention(768, 12),
        torch.rand(8, 256, 768) * 2 - 1,
    )
    yield (
        "attention (scaled dot-product, causal) of [8, 12, 256, 64]",
        ScaledAttention(),
        torch.rand(8, 12, 256, 64) * 2 - 1,
    )
    yield (
        "attention (scaled dot-product, ALiBi's bias) of [8, 12, 256, 64]",
        AlibiAttention(),
        torch.rand(8, 12, 256, 64) * 2 - 1,
    )
    # Burn's encoder layer: post-norm, GELU, layer norm epsilon 1e-5; without dropout and with
    # BERT's.
    for dropout, name in [
        (0.0, "TransformerEncoder layer (768, 12 heads, 3072) of [8, 256, 768]"),
        (0.1, "TransformerEncoder layer, dropout 0.1, of [8, 256, 768]"),
    ]:
        encoder = nn.TransformerEncoderLayer(
            768, 12, 3072, dropout=dropout, activation="gelu", batch_first=True
        )
        yield name, encoder, torch.rand(8, 256, 768) * 2 - 1


def pool_cases():
    """`bench_layers`' pools: ResNet's stem and head, DenseNet's transition, 1D max and average
    pools."""
    yield (
        "MaxPool2d 3x3/2 pad 1 of [16, 64, 112, 112]",
        nn.MaxPool2d(3, 2, 1),
        torch.rand(16, 64, 112, 112) * 2 - 1,
    )
    yield (
        "AvgPool2d 2x2/2 of [16, 128, 56, 56]",
        nn.AvgPool2d(2),
        torch.rand(16, 128, 56, 56) * 2 - 1,
    )
    yield (
        "AdaptiveAvgPool2d to 1x1 of [32, 2048, 7, 7]",
        nn.AdaptiveAvgPool2d(1),
        torch.rand(32, 2048, 7, 7) * 2 - 1,
    )
    yield (
        "MaxPool1d 3/2 pad 1 of [16, 64, 2048]",
        nn.MaxPool1d(3, 2, 1),
        torch.rand(16, 64, 2048) * 2 - 1,
    )
    yield (
        "AvgPool1d 3/1 pad 1 of [16, 64, 2048]",
        nn.AvgPool1d(3, 1, 1),
        torch.rand(16, 64, 2048) * 2 - 1,
    )


def time_layer(layer, x, reps):
    """Mean ms of forward and backward over `reps` calls after three."""
    x.requires_grad_(True)
    total = 0.0
    for rep in range(3 + reps):
        start = time.perf_counter()
        y = layer(x)
        (y * y).sum().backward()
        x.grad.sum().item()
        if rep >= 3:
            total += time.perf_counter() - start
        x.grad = None
        layer.zero_grad()
    return total * 1e3 / reps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--only", default="", help="only the layers whose name holds this")
    args = parser.parse_args()
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, layer, x in layer_cases():
        if args.only not in name:
            continue
        print(f"{name}: PyTorch {time_layer(layer, x, args.reps):.2f} ms")


if __name__ == "__main__":
    main()
