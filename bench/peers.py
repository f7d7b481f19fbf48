"""peers.py — the same model shapes in PyTorch (Debian's python3-torch and
python3-torchvision), timed as glimpse bench times itself, plus the ONNX
exports ONNX Runtime runs (ort_bench.js) and the machine's roof (an OpenBLAS
sgemm through numpy, and memory bandwidth). Prints JSON Lines:
{"runtime": R, "stage": S, "batch": B, "threads": T, "median_ms": M, "gflops": G}.

    python3 bench/peers.py --threads 2 --runs 10 --onnx-dir DIR
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision


def timed(fn, runs):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def emit(runtime, stage, batch, threads, seconds, flops):
    print(json.dumps({"runtime": runtime, "stage": stage, "batch": batch, "threads": threads,
                      "median_ms": round(seconds * 1e3 / batch, 3),
                      "gflops": round(flops / seconds / 1e9, 1) if flops else 0}), flush=True)


def vit_flops(tokens, hidden, inter, layers, patches, patch_values):
    return layers * (2 * tokens * (4 * hidden * hidden + 2 * hidden * inter) + 4 * tokens * tokens * hidden) + \
        2 * patches * patch_values * hidden


class TextTower(nn.Module):
    """CLIP ViT-B/32's text transformer shape: 12 pre-LN layers, width 512, 8 heads, 77 tokens."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
        self.register_buffer("mask", torch.full((77, 77), float("-inf")).triu(1))

    def forward(self, x):
        return self.encoder(x, mask=self.mask)


class DecoderStep(nn.Module):
    """One BLIP-base decoder step: 12 layers of self-attention over a cache,
    cross-attention over 577 image tokens' keys and values, feed-forward;
    then the 30524-word head. Weights as dense as BLIP's."""

    def __init__(self, h=768, layers=12, vocab=30524):
        super().__init__()
        self.h = h
        self.layers = nn.ModuleList(
            nn.ModuleDict({n: nn.Linear(h, h) for n in ["q", "k", "v", "o", "cq", "co"]} |
                          {"fc1": nn.Linear(h, 4 * h), "fc2": nn.Linear(4 * h, h)}) for _ in range(layers))
        self.norm = nn.LayerNorm(h)
        self.head_dense = nn.Linear(h, h)
        self.head = nn.Linear(h, vocab)

    def forward(self, x, self_keys, self_values, cross_keys, cross_values):
        heads = 12
        for i, l in enumerate(self.layers):
            q, k, v = l["q"](x), l["k"](x), l["v"](x)
            keys = torch.cat([self_keys[i], k], 1)
            values = torch.cat([self_values[i], v], 1)
            b = x.shape[0]
            att = nn.functional.scaled_dot_product_attention if hasattr(nn.functional, "scaled_dot_product_attention") else None
            def attend(q, k, v):
                q = q.view(b, -1, heads, 64).transpose(1, 2)
                k = k.view(b, -1, heads, 64).transpose(1, 2)
                v = v.view(b, -1, heads, 64).transpose(1, 2)
                return ((q @ k.transpose(-1, -2) / 8).softmax(-1) @ v).transpose(1, 2).reshape(b, -1, 768)
            x = self.norm(x + l["o"](attend(q, keys, values)))
            x = self.norm(x + l["co"](attend(l["cq"](x), cross_keys[i], cross_values[i])))
            x = self.norm(x + l["fc2"](nn.functional.gelu(l["fc1"](x))))
        return self.head(self.norm(nn.functional.gelu(self.head_dense(x))))


class OptLayers(nn.Module):
    """OPT-2.7B's decoder layers for one step (pre-LN, ReLU, a KV cache), float32: `layers` of them."""

    def __init__(self, layers, h=2560, ffn=10240):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.ModuleDict({n: nn.Linear(h, h) for n in ["q", "k", "v", "o"]} |
                          {"fc1": nn.Linear(h, ffn), "fc2": nn.Linear(ffn, h), "n1": nn.LayerNorm(h),
                           "n2": nn.LayerNorm(h)}) for _ in range(layers))

    def forward(self, x, keys, values):
        heads, b = 32, x.shape[0]
        for i, l in enumerate(self.layers):
            y = l["n1"](x)
            k = torch.cat([keys[i], l["k"](y)], 1).view(b, -1, heads, 80).transpose(1, 2)
            v = torch.cat([values[i], l["v"](y)], 1).view(b, -1, heads, 80).transpose(1, 2)
            q = l["q"](y).view(b, -1, heads, 80).transpose(1, 2)
            a = ((q @ k.transpose(-1, -2) / math.sqrt(80)).softmax(-1) @ v).transpose(1, 2).reshape(b, -1, 2560)
            x = x + l["o"](a)
            x = x + l["fc2"](torch.relu(l["fc1"](l["n2"](x))))
        return x


def blip2_peers(t, runs):
    """BLIP-2 OPT-2.7B's shapes in PyTorch float32 (its CPU float16 products are not a fair peer): the ViT-g/14
    vision tower at 224 px, and one OPT decoder step at position 63 (32 queries, an 11-token prompt, 20 tokens),
    timed over 4 of its 32 layers and scaled to 32, plus the 50272-word head: the float32 model (10.6 GB) would
    not leave room for the rest on this machine."""
    with torch.no_grad():
        vitg = torchvision.models.VisionTransformer(224, 14, 39, 16, 1408, 6144).eval()
        x = torch.randn(1, 3, 224, 224)
        emit("pytorch", "vision_blip2_224", 1, t, timed(lambda: vitg(x), max(3, runs // 3)),
             vit_flops(257, 1408, 6144, 39, 256, 3 * 14 * 14))
        del vitg
        layers, head = OptLayers(4).eval(), nn.Linear(2560, 50272, bias=False)
        cache = [torch.randn(1, 63, 2560) for _ in range(4)]
        x = torch.randn(1, 1, 2560)
        seconds = timed(lambda: layers(x, cache, cache), runs) * 8 + timed(lambda: head(x), runs)
        emit("pytorch", "decoder_step_blip2", 1, t, seconds, 0)


def export(folder, b32, text, b16):
    """The same three models as ONNX files for ort_bench.js. (Exported in
    training mode, whose dropout is 0 here, because torch 1.13 cannot export
    the fused attention its inference mode uses.)"""
    os.makedirs(folder, exist_ok=True)
    for model in (b32, text, b16):
        model.train()
    with torch.no_grad():
        torch.onnx.export(b32, torch.randn(1, 3, 224, 224), os.path.join(folder, "vit_b_32.onnx"),
                          input_names=["pixels"], output_names=["out"], dynamic_axes={"pixels": {0: "batch"}},
                          opset_version=14, training=torch.onnx.TrainingMode.PRESERVE)
        torch.onnx.export(text, torch.randn(1, 77, 512), os.path.join(folder, "text.onnx"), input_names=["tokens"],
                          output_names=["out"], dynamic_axes={"tokens": {0: "batch"}}, opset_version=14, training=torch.onnx.TrainingMode.PRESERVE)
        torch.onnx.export(b16, torch.randn(1, 3, 384, 384), os.path.join(folder, "vit_b_16_384.onnx"),
                          input_names=["pixels"], output_names=["out"], opset_version=14, training=torch.onnx.TrainingMode.PRESERVE)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--onnx-dir", help="also export the ONNX models here")
    parser.add_argument("--blip2", action="store_true", help="also BLIP-2 OPT-2.7B's vision tower and decoder step")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    t = args.threads
    # the models are made outside inference mode so that they can be exported afterwards
    b32 = torchvision.models.vit_b_32().eval()
    text = TextTower().eval()
    b16 = torchvision.models.vit_b_16(image_size=384).eval()
    step = DecoderStep().eval()
    with torch.no_grad():
        flops32 = vit_flops(50, 768, 3072, 12, 49, 3 * 32 * 32)
        for batch in (1, 8):
            x = torch.randn(batch, 3, 224, 224)
            emit("pytorch", "vision", batch, t, timed(lambda: b32(x), args.runs), flops32 * batch)
        flops_text = 12 * (2 * 77 * (4 * 512 * 512 + 2 * 512 * 2048) + 4 * 77 * 77 * 512)
        for batch in (1, 8):
            x = torch.randn(batch, 77, 512)
            emit("pytorch", "text", batch, t, timed(lambda: text(x), args.runs), flops_text * batch)
        x = torch.randn(1, 3, 384, 384)
        emit("pytorch", "vision_blip_384", 1, t, timed(lambda: b16(x), max(3, args.runs // 3)),
             vit_flops(577, 768, 3072, 12, 576, 3 * 16 * 16))
        for beams in (1, 3):
            cache = [torch.randn(beams, 20, 768) for _ in range(12)]
            cross = [torch.randn(beams, 577, 768) for _ in range(12)]
            x = torch.randn(beams, 1, 768)
            emit("pytorch", "decoder_step", beams, t,
                 timed(lambda: step(x, cache, cache, cross, cross), args.runs) * beams, 0)
    if args.blip2:
        blip2_peers(t, args.runs)
    if args.onnx_dir:
        export(args.onnx_dir, b32, text, b16)
    # the roof 
    a = np.random.rand(2048, 2048).astype(np.float32)
    seconds = timed(lambda: a @ a, 5)
    print(json.dumps({"runtime": "roof", "stage": "sgemm_2048", "threads": t, "median_ms": round(seconds * 1e3, 3),
                      "gflops": round(2 * 2048 ** 3 / seconds / 1e9, 1)}), flush=True)
    big = np.ones(1 << 28, dtype=np.float32)
    out = np.empty_like(big)
    seconds = timed(lambda: np.copyto(out, big), 5)
    print(json.dumps({"runtime": "roof", "stage": "bandwidth_copy_1thread", "median_ms": round(seconds * 1e3, 3),
                      "gbytes_per_s": round(2 * big.nbytes / seconds / 1e9, 1)}), flush=True)


if __name__ == "__main__":
    main()
