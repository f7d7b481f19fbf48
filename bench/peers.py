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


class SiglipVision(nn.Module):
    """SigLIP's vision tower: patches without a class token, pre-LN layers with
    tanh GELU, a final LayerNorm, and the attention-pooling head (one learned
    probe attending to every patch, then a residual MLP)."""

    def __init__(self, hidden, layers, heads, inter, patch, size):
        super().__init__()
        gelu = lambda x: nn.functional.gelu(x, approximate="tanh")
        self.patches = nn.Conv2d(3, hidden, patch, patch)
        self.positions = nn.Parameter(torch.randn(1, (size // patch) ** 2, hidden) * 0.02)
        layer = nn.TransformerEncoderLayer(hidden, heads, inter, dropout=0.0, activation=gelu, batch_first=True,
                                           norm_first=True, layer_norm_eps=1e-6)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.post_norm = nn.LayerNorm(hidden, eps=1e-6)
        self.probe = nn.Parameter(torch.randn(1, 1, hidden))
        self.pool = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.pool_norm = nn.LayerNorm(hidden, eps=1e-6)
        self.fc1, self.fc2, self.gelu = nn.Linear(hidden, inter), nn.Linear(inter, hidden), gelu

    def forward(self, pixels):
        x = self.patches(pixels).flatten(2).transpose(1, 2) + self.positions
        x = self.post_norm(self.encoder(x))
        probe = self.probe.expand(x.shape[0], -1, -1)
        pooled = self.pool(probe, x, x, need_weights=False)[0]
        return (pooled + self.fc2(self.gelu(self.fc1(self.pool_norm(pooled)))))[:, 0]


# SigLIP's published vision shapes: stage name -> (hidden, layers, heads, MLP, patch, size)
SIGLIP_SHAPES = {"vision_siglip_base_224": (768, 12, 12, 3072, 16, 224),
                 "vision_siglip_so400m_384": (1152, 27, 16, 4304, 14, 384)}


class Gpt2CrossDecoder(nn.Module):
    """GPT-2 with a cross-attention block in every layer (ViT-GPT2's decoder,
    transformers-free): pre-LN causal self-attention over a cache,
    cross-attention to the image tokens' keys and values (made once per
    image), a gelu_new MLP, ln_f and the head tied to the token table."""

    def __init__(self, h, layers, heads, inner, vocab, positions):
        super().__init__()
        self.h, self.heads = h, heads
        self.wte, self.wpe = nn.Embedding(vocab, h), nn.Embedding(positions, h)
        self.layers = nn.ModuleList(
            nn.ModuleDict({"ln_1": nn.LayerNorm(h), "c_attn": nn.Linear(h, 3 * h), "c_proj": nn.Linear(h, h),
                           "ln_cross": nn.LayerNorm(h), "q_attn": nn.Linear(h, h), "kv_attn": nn.Linear(h, 2 * h),
                           "cross_proj": nn.Linear(h, h), "ln_2": nn.LayerNorm(h), "c_fc": nn.Linear(h, inner),
                           "mlp_proj": nn.Linear(inner, h)}) for _ in range(layers))
        self.ln_f = nn.LayerNorm(h)

    def split(self, x):
        return x.view(x.shape[0], -1, self.heads, self.h // self.heads).transpose(1, 2)

    def attend(self, q, k, v):
        d = self.h // self.heads
        out = ((self.split(q) @ self.split(k).transpose(-1, -2)) / math.sqrt(d)).softmax(-1) @ self.split(v)
        return out.transpose(1, 2).reshape(q.shape[0], -1, self.h)

    def image(self, encoded):
        """Each layer's cross-attention keys and values of the image tokens."""
        return [l["kv_attn"](encoded).split(self.h, -1) for l in self.layers]

    def step(self, token, position, cache, image):
        """One token (its id [1]) at `position`; the cache is [(keys, values)] per layer, extended here."""
        x = self.wte(token).view(1, 1, self.h) + self.wpe.weight[position]
        for i, l in enumerate(self.layers):
            q, k, v = l["c_attn"](l["ln_1"](x)).split(self.h, -1)
            keys, values = (k, v) if cache[i] is None else (torch.cat([cache[i][0], k], 1),
                                                               torch.cat([cache[i][1], v], 1))
            cache[i] = (keys, values)
            x = x + l["c_proj"](self.attend(q, keys, values))  # one query sees every cached key: causal
            x = x + l["cross_proj"](self.attend(l["q_attn"](l["ln_cross"](x)), *image[i]))
            x = x + l["mlp_proj"](nn.functional.gelu(l["c_fc"](l["ln_2"](x)), approximate="tanh"))
        return self.ln_f(x)[0, -1] @ self.wte.weight.T


def vit_gpt2_models(config_path):
    """A torchvision ViT and the GPT-2 decoder of a VisionEncoderDecoderModel config's shapes."""
    config = json.load(open(config_path))
    e, d = config["encoder"], config["decoder"]
    vit = torchvision.models.VisionTransformer(e.get("image_size", 224), e.get("patch_size", 16),
                                               e.get("num_hidden_layers", 12), e.get("num_attention_heads", 12),
                                               e.get("hidden_size", 768), e.get("intermediate_size", 3072)).eval()
    h = d.get("n_embd", 768)
    decoder = Gpt2CrossDecoder(h, d.get("n_layer", 12), d.get("n_head", 12), d.get("n_inner") or 4 * h,
                               d.get("vocab_size", 50257), d.get("n_positions", 1024)).eval()
    return vit, decoder, e.get("image_size", 224), config.get("decoder_start_token_id", 50256)


def vit_gpt2_caption(vit, decoder, pixels, start, tokens):
    """A greedy caption of `tokens` tokens as glimpse's caption stage makes it: the encoder's every token, the
    image's keys and values once, then one cached step per token."""
    x = vit._process_input(pixels)
    x = torch.cat([vit.class_token.expand(x.shape[0], -1, -1), x], 1)
    image = decoder.image(vit.encoder(x))
    cache = [None] * len(decoder.layers)
    token = torch.tensor([start])
    for position in range(tokens):
        token = decoder.step(token, position, cache, image).argmax().view(1)


def export_siglip(folder, siglips):
    """SigLIP's vision towers (stage name -> SiglipVision) as FOLDER/STAGE.onnx, exported as export() does."""
    for stage, model in siglips.items():
        model.train()
        size = SIGLIP_SHAPES[stage][5]
        with torch.no_grad():
            torch.onnx.export(model, torch.randn(1, 3, size, size), os.path.join(folder, stage + ".onnx"),
                              input_names=["pixels"], output_names=["out"], opset_version=14,
                              training=torch.onnx.TrainingMode.PRESERVE)


def export_vit_b_32(folder, b32):
    """torchvision's ViT-B/32 (CLIP ViT-B/32's vision shape) as FOLDER/vit_b_32.onnx, batch dynamic, exported as
    export() explains; also what bench/photos.py's ONNX Runtime pipeline runs."""
    b32.train()
    with torch.no_grad():
        torch.onnx.export(b32, torch.randn(1, 3, 224, 224), os.path.join(folder, "vit_b_32.onnx"),
                          input_names=["pixels"], output_names=["out"], dynamic_axes={"pixels": {0: "batch"}},
                          opset_version=14, training=torch.onnx.TrainingMode.PRESERVE)


def export(folder, b32, text, b16, siglips):
    """The same three models as ONNX files for ort_bench.js. (Exported in
    training mode, whose dropout is 0 here, because torch 1.13 cannot export
    the fused attention its inference mode uses.)"""
    os.makedirs(folder, exist_ok=True)
    for model in (b32, text, b16):
        model.train()
    with torch.no_grad():
        export_vit_b_32(folder, b32)
        torch.onnx.export(text, torch.randn(1, 77, 512), os.path.join(folder, "text.onnx"), input_names=["tokens"],
                          output_names=["out"], dynamic_axes={"tokens": {0: "batch"}}, opset_version=14, training=torch.onnx.TrainingMode.PRESERVE)
        torch.onnx.export(b16, torch.randn(1, 3, 384, 384), os.path.join(folder, "vit_b_16_384.onnx"),
                          input_names=["pixels"], output_names=["out"], opset_version=14, training=torch.onnx.TrainingMode.PRESERVE)
        export_siglip(folder, siglips)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--onnx-dir", help="also export the ONNX models here")
    parser.add_argument("--blip2", action="store_true", help="also BLIP-2 OPT-2.7B's vision tower and decoder step")
    parser.add_argument("--vit-gpt2-config", help="a VisionEncoderDecoderModel config.json: also a ViT-GPT2 caption "
                        "of --caption-tokens tokens")
    parser.add_argument("--caption-tokens", type=int, default=16)
    parser.add_argument("--only-vit-gpt2", action="store_true", help="that caption alone (checking the script)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    t = args.threads
    if args.vit_gpt2_config:
        vit, decoder, size, start = vit_gpt2_models(args.vit_gpt2_config)
        pixels = torch.randn(1, 3, size, size)
        with torch.no_grad():
            emit("pytorch", "caption_vit_gpt2", 1, t,
                 timed(lambda: vit_gpt2_caption(vit, decoder, pixels, start, args.caption_tokens),
                       max(3, args.runs // 3)), 0)
    if args.only_vit_gpt2:
        return
    # the models are made outside inference mode so that they can be exported afterwards
    b32 = torchvision.models.vit_b_32().eval()
    text = TextTower().eval()
    b16 = torchvision.models.vit_b_16(image_size=384).eval()
    step = DecoderStep().eval()
    siglips = {stage: SiglipVision(*shape).eval() for stage, shape in SIGLIP_SHAPES.items()}
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
        for stage, model in siglips.items():
            hidden, layers, heads, inter, patch, size = SIGLIP_SHAPES[stage]
            x = torch.randn(1, 3, size, size)
            tokens = (size // patch) ** 2
            emit("pytorch", stage, 1, t, timed(lambda: model(x), max(3, args.runs // 3)),
                 vit_flops(tokens, hidden, inter, layers, tokens, 3 * patch * patch))
        for beams in (1, 3):
            cache = [torch.randn(beams, 20, 768) for _ in range(12)]
            cross = [torch.randn(beams, 577, 768) for _ in range(12)]
            x = torch.randn(beams, 1, 768)
            emit("pytorch", "decoder_step", beams, t,
                 timed(lambda: step(x, cache, cache, cross, cross), args.runs) * beams, 0)
    if args.blip2:
        blip2_peers(t, args.runs)
    if args.onnx_dir:
        export(args.onnx_dir, b32, text, b16, siglips)
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
