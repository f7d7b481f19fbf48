"""train_demo.py — trains the bundled demo models on synthetic shape pictures
and writes them as Hugging Face snapshot folders under examples/models/:

    examples/models/demo-blip-caption   BlipForConditionalGeneration (captions)
    examples/models/demo-clip           CLIPModel (ranking, classification, search)

Pictures come from glimpse-make-pictures (the same drawing code the C tests
use), resized with Pillow's bicubic filter exactly as glimpse and
transformers preprocess them. Training pictures use seed 1, the progress
checks seed 2; the C tests use seeds never used here. Reproducible: torch
and the data are seeded. Needs Debian's python3-torch, python3-numpy and
python3-pil, and a built glimpse (build/). About 25 minutes on 2 cores (run it with OPENBLAS_CORETYPE unset: the
Haswell kernels it selects slow torch down).

    python3 tools/train/train_demo.py [--caption-minutes 14] [--clip-minutes 9] [--pictures 60000]

A time budget makes the step count depend on the machine's speed: the
shipped captioner ran 1404 steps of a 1509-step schedule and the dual
encoder 978 of 1044, and
    python3 tools/train/train_demo.py --caption-steps 1404/1509 --clip-steps 978/1044
repeats exactly those schedules (data, order and initialisation are seeded).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
import models  # noqa: E402
import safetensors_io  # noqa: E402
import vocabularies  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)
SIDE = 224
LEARNING_RATE = 2e-3


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pictures(seed, count, size, tool):
    """(uint8 [count, size, size, 3], captions) drawn by glimpse-make-pictures."""
    images = np.empty((count, size, size, 3), dtype=np.uint8)
    captions = []
    chunk = 2000
    with tempfile.TemporaryDirectory() as folder:
        for first in range(0, count, chunk):
            n = min(chunk, count - first)
            subprocess.run([tool, "--out", folder, "--seed", str(seed), "--first", str(first), "--count", str(n),
                            "--raw"], check=True)
            raw = np.fromfile(os.path.join(folder, "pictures.rgb"), dtype=np.uint8).reshape(n, SIDE, SIDE, 3)
            for i in range(n):
                images[first + i] = np.asarray(Image.fromarray(raw[i]).resize((size, size), Image.BICUBIC))
            with open(os.path.join(folder, "captions.tsv")) as f:
                captions += [line.rstrip("\n").split("\t")[1] for line in f]
    return images, captions


def to_pixels(batch):
    """uint8 NHWC -> normalised float NCHW, as the processors compute it."""
    x = batch.astype(np.float32) * np.float32(1 / 255)
    return torch.from_numpy(((x - MEAN) / STD).transpose(0, 3, 1, 2).copy())


INVERSE = {"above": "below", "below": "above", "left of": "right of", "right of": "left of"}


def is_true(caption, truth):
    """Right if it is the reference caption or the same scene named the other way round."""
    if caption == truth:
        return True
    for relation, inverse in INVERSE.items():
        marker = f" {relation} "
        if marker in truth:
            first, second = truth.split(marker)
            return caption == f"{second} {inverse} {first}"
    return False


def parse_steps(steps):
    """"N" runs N steps of an N-step schedule; "N/M" stops after N of an M-step one."""
    if not steps:
        return 10 ** 9, 10 ** 9
    stop, _, total = steps.partition("/")
    return int(stop), int(total or stop)


def schedule(step, total, warmup=200):
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


def optimise(model, loss_of, count, minutes, batch, steps, seed, report):
    """The loop both models share: AdamW, warm-up then cosine schedule,
    gradient clipping, shuffled batches of indices into the pictures, for a
    time budget (the schedule fitted to the speed seen over the first 50
    steps) or a fixed "N" / "N/M" step count. loss_of(indices) gives a
    batch's loss; report(step, estimated, loss) is called every 100 steps."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    started, step = time.time(), 0
    stop, estimated = parse_steps(steps)
    budget = float("inf") if steps else minutes * 60
    rng = np.random.default_rng(seed)
    while time.time() - started < budget:
        order = rng.permutation(count)
        for first in range(0, len(order) - batch + 1, batch):
            loss = loss_of(order[first : first + batch])
            for group in optimizer.param_groups:
                group["lr"] = LEARNING_RATE * schedule(step, estimated)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            if step == 50 and not steps:  # now the speed is known: fit the schedule to the time budget
                estimated = int(step * budget / (time.time() - started))
            if step % 100 == 0:
                report(step, estimated, loss)
            if step >= min(estimated, stop) or time.time() - started >= budget:
                break
        if step >= min(estimated, stop):
            break
    model.eval()
    return model, step


# --------------------------------------------------------------- captioner


WIDTH, VISION_LAYERS, TEXT_LAYERS = 96, 3, 2


def blip_config(size, vocab):
    vision = {"hidden_size": WIDTH, "num_hidden_layers": VISION_LAYERS, "num_attention_heads": 4,
              "intermediate_size": 2 * WIDTH,
              "image_size": size, "patch_size": 16, "hidden_act": "gelu", "layer_norm_eps": 1e-5,
              "num_channels": 3, "model_type": "blip_vision_model"}
    text = {"hidden_size": WIDTH, "num_hidden_layers": TEXT_LAYERS, "num_attention_heads": 4,
            "intermediate_size": 2 * WIDTH, "vocab_size": len(vocab), "max_position_embeddings": 32,
            "hidden_act": "gelu", "layer_norm_eps": 1e-12, "encoder_hidden_size": WIDTH, "bos_token_id": vocab["[DEC]"],
            "sep_token_id": vocab["[SEP]"], "pad_token_id": vocab["[PAD]"], "eos_token_id": 2, "is_decoder": True,
            "tie_word_embeddings": True, "model_type": "blip_text_model"}
    return {"architectures": ["BlipForConditionalGeneration"], "model_type": "blip", "projection_dim": 128,
            "image_text_hidden_size": 128, "vision_config": vision, "text_config": text,
            "torch_dtype": "float32"}


def train_blip(images, captions, val_images, val_captions, vocab, config, minutes, batch, steps=None):
    model = models.BlipForConditionalGeneration(config)
    encoded = [vocabularies.bert_encode(vocab, c) for c in captions]
    length = max(len(e) for e in encoded)
    ids = np.zeros((len(encoded), length), dtype=np.int64)
    for i, e in enumerate(encoded):
        ids[i, : len(e)] = e

    def loss_of(picked):
        tokens = torch.from_numpy(ids[picked])
        logits = model.logits(to_pixels(images[picked]), tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1),
                               ignore_index=vocab["[PAD]"])

    def report(step, estimated, loss):
        log(f"caption step {step}/{estimated} loss {loss.item():.4f} "
            f"accuracy {evaluate_blip(model, val_images[:200], val_captions[:200], vocab, config):.3f}")

    return optimise(model, loss_of, len(images), minutes, batch, steps, 1, report)


def blip_captions(model, images, vocab, config):
    inverse = {i: t for t, i in vocab.items()}
    out = []
    with torch.no_grad():
        for first in range(0, len(images), 100):
            ids = model.greedy(to_pixels(images[first : first + 100]), vocab["[DEC]"], vocab["[SEP]"], 16)
            for row in ids.tolist():
                words = []
                for i in row[1:]:
                    if i == vocab["[SEP]"]:
                        break
                    words.append(inverse[i])
                out.append(" ".join(words))
    return out


def evaluate_blip(model, images, captions, vocab, config):
    model.eval()
    predicted = blip_captions(model, images, vocab, config)
    model.train()
    return sum(is_true(p, t) for p, t in zip(predicted, captions)) / len(captions)


# ------------------------------------------------------------ dual encoder


def clip_config(size, vocab, start, end):
    vision = {"hidden_size": WIDTH, "num_hidden_layers": VISION_LAYERS, "num_attention_heads": 4,
              "intermediate_size": 2 * WIDTH, "image_size": size, "patch_size": 16, "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5,
              "num_channels": 3, "projection_dim": 64, "model_type": "clip_vision_model"}
    text = {"hidden_size": WIDTH, "num_hidden_layers": TEXT_LAYERS, "num_attention_heads": 4,
            "intermediate_size": 2 * WIDTH, "vocab_size": len(vocab), "max_position_embeddings": 32,
            "hidden_act": "quick_gelu",
            "layer_norm_eps": 1e-5, "bos_token_id": start, "eos_token_id": end, "pad_token_id": end,
            "projection_dim": 64, "model_type": "clip_text_model"}
    return {"architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": 64,
            "logit_scale_init_value": 2.6592, "vision_config": vision, "text_config": text,
            "torch_dtype": "float32"}


def clip_batch_texts(vocab, captions):
    encoded = [vocabularies.clip_encode(vocab, c) for c in captions]
    length = max(len(e) for e in encoded)
    end = vocab["<|endoftext|>"]
    ids = torch.tensor([e + [end] * (length - len(e)) for e in encoded])
    return ids, torch.tensor([len(e) for e in encoded])


def canonical(caption):
    """One name per scene, so that both phrasings count as the same target."""
    for relation, inverse in INVERSE.items():
        marker = f" {relation} "
        if marker in caption:
            first, second = caption.split(marker)
            return min(caption, f"{second} {inverse} {first}")
    return caption


def train_clip(images, captions, val_images, val_captions, vocab, config, minutes, batch, steps=None):
    model = models.CLIPModel(config)
    scenes = [canonical(c) for c in captions]

    def loss_of(picked):
        ids, lengths = clip_batch_texts(vocab, [captions[i] for i in picked])
        image = model.image_embeds(to_pixels(images[picked]))
        text = model.text_embeds(ids, lengths)
        logits = model.logit_scale.clamp(max=math.log(100)).exp() * image @ text.T
        # pictures with the same scene are all right answers
        same = torch.tensor([[scenes[i] == scenes[j] for j in picked] for i in picked], dtype=torch.float32)
        targets = same / same.sum(1, keepdim=True)
        return 0.5 * (-(targets * logits.log_softmax(1)).sum(1).mean()
                      - (targets.T * logits.T.log_softmax(1)).sum(1).mean())

    def report(step, estimated, loss):
        log(f"clip step {step}/{estimated} loss {loss.item():.4f} "
            f"top-1 {evaluate_clip(model, val_images, val_captions, vocab):.3f}")

    return optimise(model, loss_of, len(images), minutes, batch, steps, 2, report)


def evaluate_clip(model, images, captions, vocab, groups=10, size=20):
    """Text-to-image top-1 over groups of pictures with distinct captions."""
    model.eval()
    right = total = 0
    with torch.no_grad():
        used, picked = set(), []
        for i, c in enumerate(captions):
            if canonical(c) not in used:
                used.add(canonical(c))
                picked.append(i)
            if len(picked) == size:
                image = model.image_embeds(to_pixels(images[picked]))
                ids, lengths = clip_batch_texts(vocab, [captions[j] for j in picked])
                best = (model.text_embeds(ids, lengths) @ image.T).argmax(1)
                right += int((best == torch.arange(size)).sum())
                total += size
                used, picked = set(), []
                if total >= groups * size:
                    break
    model.train()
    return right / max(1, total)


# ----------------------------------------------------------------- output


def save(model, config, folder, preprocessor, half, generation=None):
    os.makedirs(folder, exist_ok=True)
    if generation:
        json.dump(generation, open(os.path.join(folder, "generation_config.json"), "w"), indent=2)
    tensors = {}
    for name, value in model.state_dict().items():
        array = value.detach().numpy()
        tensors[name] = array.astype(np.float16) if half else array.astype(np.float32)
    safetensors_io.save(os.path.join(folder, "model.safetensors"), tensors)
    json.dump(config, open(os.path.join(folder, "config.json"), "w"), indent=2)
    json.dump(preprocessor, open(os.path.join(folder, "preprocessor_config.json"), "w"), indent=2)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--caption-minutes", type=float, default=14, help="training time of the captioner")
    parser.add_argument("--clip-minutes", type=float, default=9, help="training time of the dual encoder")
    parser.add_argument("--caption-steps", help="N or N/M: fixed steps instead of a time budget (the shipped "
                        "captioner: 1404/1509)")
    parser.add_argument("--clip-steps", help="N or N/M: fixed steps instead of a time budget (the shipped "
                        "dual encoder: 978/1044)")
    parser.add_argument("--pictures", type=int, default=60000, help="training pictures (seed 1)")
    parser.add_argument("--size", type=int, default=64, help="model image size")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--tool", default=os.path.join(ROOT, "build", "glimpse-make-pictures"))
    parser.add_argument("--out", default=os.path.join(ROOT, "examples", "models"))
    parser.add_argument("--only", choices=["caption", "clip"], help="train one of the two")
    parser.add_argument("--f32", action="store_true", help="keep float32 weights (default float16)")
    args = parser.parse_args()
    global LEARNING_RATE
    LEARNING_RATE = args.lr
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 2)
    started = time.time()
    log(f"drawing {args.pictures} training pictures")
    images, captions = pictures(1, args.pictures, args.size, args.tool)
    val_images, val_captions = pictures(2, 400, args.size, args.tool)
    log("pictures ready")
    mean, std = [float(v) for v in MEAN], [float(v) for v in STD]
    if args.only in (None, "caption"):
        folder = os.path.join(args.out, "demo-blip-caption")
        os.makedirs(folder, exist_ok=True)
        vocab = vocabularies.bert_files(folder)
        config = blip_config(args.size, vocab)
        model, steps = train_blip(images, captions, val_images, val_captions, vocab, config, args.caption_minutes,
                                   args.batch, args.caption_steps)
        accuracy = evaluate_blip(model, val_images, val_captions, vocab, config)
        log(f"captioner: {steps} steps, {accuracy:.3f} of 400 checking pictures captioned right")
        save(model.eval(), config, folder, {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True,
                                            "do_resize": True, "image_mean": mean, "image_std": std,
                                            "image_processor_type": "BlipImageProcessor", "resample": 3,
                                            "rescale_factor": 1 / 255, "processor_class": "BlipProcessor",
                                            "size": {"height": args.size, "width": args.size}}, not args.f32,
             # greedy search is how it was checked while training; captions are at most 12 words
             {"num_beams": 1, "max_length": 16, "min_length": 0, "bos_token_id": vocab["[DEC]"],
              "eos_token_id": vocab["[SEP]"], "pad_token_id": vocab["[PAD]"]})
    if args.only in (None, "clip"):
        folder = os.path.join(args.out, "demo-clip")
        os.makedirs(folder, exist_ok=True)
        vocab, start, end = vocabularies.clip_files(folder)
        config = clip_config(args.size, vocab, start, end)
        model, steps = train_clip(images, captions, val_images, val_captions, vocab, config, args.clip_minutes,
                                  args.batch, args.clip_steps)
        log(f"dual encoder: {steps} steps, top-1 {evaluate_clip(model, val_images, val_captions, vocab, 20):.3f}")
        save(model.eval(), config, folder, {"crop_size": {"height": args.size, "width": args.size},
                                            "do_center_crop": True, "do_convert_rgb": True, "do_normalize": True,
                                            "do_rescale": True, "do_resize": True, "image_mean": mean,
                                            "image_std": std, "image_processor_type": "CLIPImageProcessor",
                                            "resample": 3, "rescale_factor": 1 / 255,
                                            "processor_class": "CLIPProcessor",
                                            "size": {"shortest_edge": args.size}}, not args.f32)
    log(f"done in {(time.time() - started) / 60:.1f} minutes")


if __name__ == "__main__":
    main()
