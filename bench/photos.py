"""photos.py — the peers of `glimpse index` on twelve-megapixel photographs,
for bench/photos.sh: the pictures themselves, and the pipelines photo
applications run (Pillow decoding and CLIP's preprocessing, then PyTorch or
ONNX Runtime on a ViT-B/32), and --fast-decode's embeddings against the
exact path's.

    python3 bench/photos.py make DIR COUNT          COUNT 4032x3024 JPEGs (quality 90)
    python3 bench/photos.py export DIR              torchvision's ViT-B/32 as DIR/vit_b_32.onnx
    python3 bench/photos.py torch DIR THREADS       Pillow + PyTorch over DIR's JPEGs: {"pictures_per_s": ...}
    python3 bench/photos.py feed DIR                Pillow's pixel_values on stdout, batches of 8, for ort_photos.js
    python3 bench/photos.py cosine EXACT FAST       cosines of two `glimpse embed --json` outputs: mean and worst
"""
import json
import os
import sys
import time

import numpy as np
from PIL import Image, ImageOps

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..")
# the real photographs among the fixtures' pictures (scikit-image's data set)
PHOTOGRAPHS = ["astronaut.png", "camera.png", "chelsea.png", "coffee.png", "rocket.jpg"]
BATCH = 8
MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)


def make(folder, count, fixtures):
    """count distinct 12 MP JPEGs: each photograph cropped a little differently (a few pixels in from each
    side, mirrored every other time), upscaled bicubically to 4032x3024 and saved at quality 90."""
    os.makedirs(folder, exist_ok=True)
    sources = [Image.open(os.path.join(fixtures, "images", name)).convert("RGB") for name in PHOTOGRAPHS]
    for i in range(count):
        image = sources[i % len(sources)]
        k = i // len(sources)
        w, h = image.size
        crop = image.crop((k % 5, (k // 5) % 5, w - (k % 7), h - (k % 3)))
        if k % 2:
            crop = ImageOps.mirror(crop)
        crop.resize((4032, 3024), Image.BICUBIC).save(os.path.join(folder, "photo%04d.jpg" % i), quality=90)


def pictures(folder):
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".jpg"))


def pixel_values(path):
    """CLIPImageProcessor's steps as transformers' pipelines run them: load_image (exif_transpose, RGB), the
    short side to 224 (Pillow bicubic), centre crop 224, rescale, normalise, channels first."""
    image = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
    w, h = image.size
    short, long = (w, h) if w <= h else (h, w)
    new_long = int(224 * long / short)
    image = image.resize((224, new_long) if w <= h else (new_long, 224), Image.BICUBIC)
    w, h = image.size
    left, top = (w - 224) // 2, (h - 224) // 2
    array = np.asarray(image.crop((left, top, left + 224, top + 224)), dtype=np.float32) / 255.0
    return ((array - MEAN) / STD).transpose(2, 0, 1)


def batches(folder):
    paths = pictures(folder)
    for first in range(0, len(paths), BATCH):
        yield np.stack([pixel_values(p) for p in paths[first:first + BATCH]])


def run_torch(folder, threads):
    import torch
    import torchvision
    torch.set_num_threads(threads)
    model = torchvision.models.vit_b_32().eval()
    count = len(pictures(folder))
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in batches(folder):
            model(torch.from_numpy(batch))
    seconds = time.perf_counter() - start
    print(json.dumps({"runtime": "pillow+pytorch", "pictures": count, "seconds": round(seconds, 3),
                      "pictures_per_s": round(count / seconds, 3)}), flush=True)


def feed(folder):
    out = sys.stdout.buffer
    for batch in batches(folder):
        out.write(np.int32(batch.shape[0]).tobytes())
        out.write(np.ascontiguousarray(batch, dtype=np.float32).tobytes())
        out.flush()


def cosine(exact_file, fast_file):
    def read(path):
        return {(o["image"], o.get("time")): np.array(o["embedding"], dtype=np.float64)
                for o in map(json.loads, open(path))}
    exact, fast = read(exact_file), read(fast_file)
    values = [float(np.dot(exact[k], fast[k]) / np.linalg.norm(exact[k]) / np.linalg.norm(fast[k])) for k in exact]
    worst = min(values)
    print(json.dumps({"pictures": len(values), "mean_cosine": round(float(np.mean(values)), 6),
                      "worst_cosine": round(worst, 6)}))


def main():
    mode = sys.argv[1]
    if mode == "make":
        make(sys.argv[2], int(sys.argv[3]), os.environ.get("GLIMPSE_FIXTURES", os.path.join(SOURCE, "..", "shared", "fixtures")))
    elif mode == "export":
        import torchvision
        sys.path.insert(0, HERE)
        import peers
        os.makedirs(sys.argv[2], exist_ok=True)
        peers.export_vit_b_32(sys.argv[2], torchvision.models.vit_b_32().eval())
    elif mode == "torch":
        run_torch(sys.argv[2], int(sys.argv[3]))
    elif mode == "feed":
        feed(sys.argv[2])
    elif mode == "cosine":
        cosine(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
