#!/usr/bin/env python3
"""duplicate_threshold.py — measures where `glimpse duplicates` should draw its line.

Draws N pictures with glimpse-make-pictures, makes edited copies of each with
Pillow (JPEG re-encoded at quality 60, resized to 60%, centre-cropped to 90%,
brightened by 10%, and the crop re-encoded), embeds every file with
`glimpse embed`, and prints the cosines of copy/original pairs (should be
duplicates) against those of distinct original pairs (should not), with the
precision and recall of pairs at each candidate threshold.

    /usr/bin/python3 bench/duplicate_threshold.py --glimpse build/glimpse \
        --make-pictures build/glimpse-make-pictures --model examples/models/demo-clip [--count 100]
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
from PIL import Image, ImageEnhance


def edits(image):
    w, h = image.size
    crop = image.crop((w // 20, h // 20, w - w // 20, h - h // 20))
    return {
        "jpeg60": ("jpg", image, 60),
        "resized60": ("png", image.resize((w * 6 // 10, h * 6 // 10), Image.BICUBIC), None),
        "crop90": ("png", crop, None),
        "bright110": ("png", ImageEnhance.Brightness(image).enhance(1.1), None),
        "crop90_jpeg75": ("jpg", crop, 75),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--glimpse", required=True)
    parser.add_argument("--make-pictures", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=4242)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="glimpse-duplicates-")
    subprocess.run([args.make_pictures, "--out", folder, "--seed", str(args.seed), "--count", str(args.count)],
                   check=True, stdout=subprocess.DEVNULL)
    originals = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".png"))
    copies = []  # (original index, kind, path)
    for i, path in enumerate(originals):
        image = Image.open(path).convert("RGB")
        for kind, (extension, edited, quality) in edits(image).items():
            out = f"{path[:-4]}-{kind}.{extension}"
            edited.save(out, quality=quality) if quality else edited.save(out)
            copies.append((i, kind, out))
    files = originals + [c[2] for c in copies]
    command = [args.glimpse, "embed", "-m", args.model, "--json", "--quiet"]
    for f in files:
        command += ["-i", f]
    lines = subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()
    embedding = {}
    for line in lines:
        record = json.loads(line)
        embedding[record["image"]] = np.array(record["embedding"], dtype=np.float64)
    original = np.stack([embedding[p] for p in originals])
    positives = {}
    for i, kind, path in copies:
        positives.setdefault(kind, []).append(float(original[i] @ embedding[path]))
    cosines = original @ original.T
    upper = np.triu_indices(len(originals), 1)
    negatives = cosines[upper]
    captions = {}
    with open(os.path.join(folder, "captions.tsv")) as table:
        for line in table:
            name, caption = line.rstrip("\n").split("\t")[:2]
            captions[os.path.join(folder, name)] = caption
    same_caption = np.array([captions.get(originals[a]) == captions.get(originals[b]) for a, b in zip(*upper)])
    every_positive = np.concatenate([np.array(v) for v in positives.values()])
    print(f"model {args.model}, {len(originals)} pictures, {len(copies)} edited copies, {negatives.size} distinct pairs "
          f"({int(same_caption.sum())} of them with the same caption)")
    for kind, values in positives.items():
        print(f"  copy {kind:14s} cosine min {min(values):.4f}  median {np.median(values):.4f}")
    top = np.sort(negatives)[::-1]
    print(f"  distinct pairs  cosine max {top[0]:.4f}  99.9th percentile {np.percentile(negatives, 99.9):.4f}  "
          f"median {np.median(negatives):.4f}; highest five {', '.join(f'{v:.4f}' for v in top[:5])}")
    for threshold in (0.90, 0.93, 0.95, 0.96, 0.97, 0.98, 0.99):
        true_positive = int((every_positive >= threshold).sum())
        false_positive = int((negatives >= threshold).sum())
        recall = true_positive / every_positive.size
        precision = true_positive / max(1, true_positive + false_positive)
        joined_same = int(((negatives >= threshold) & same_caption).sum())
        print(f"  threshold {threshold:.2f}: recall {recall:.4f} ({true_positive}/{every_positive.size}), "
              f"precision {precision:.4f} ({false_positive} distinct pairs joined, {joined_same} of them with the "
              f"same caption)")
    subprocess.run(["rm", "-rf", folder], check=True)


if __name__ == "__main__":
    main()
