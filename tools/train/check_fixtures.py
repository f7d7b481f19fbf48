"""check_fixtures.py — proves models.py computes what transformers computes,
before any training: loads the reference fixtures (clip-tiny and
blip-caption-tiny) into the torch models and compares hidden states,
embeddings, logits and greedy captions with the stored reference outputs.

    python3 tools/train/check_fixtures.py [../shared/fixtures]
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import models  # noqa: E402
import safetensors_io  # noqa: E402


def compare(what, actual, expected, tolerance=1e-4):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    difference = np.max(np.abs(actual - expected) / np.maximum(1.0, np.abs(expected)))
    print(f"{what:32s} max difference {difference:.3g}")
    if not difference <= tolerance:
        raise SystemExit(f"{what}: {difference} is over {tolerance}")


def check_clip(folder):
    config = json.load(open(os.path.join(folder, "config.json")))
    expected = json.load(open(os.path.join(folder, "expected.json")))
    reference = safetensors_io.load(os.path.join(folder, "reference.safetensors"))
    model = models.CLIPModel(config).eval()
    extra = models.load_state(model, safetensors_io.load(os.path.join(folder, "model.safetensors")))
    assert all("position_ids" in n for n in extra), extra
    with torch.no_grad():
        pixels = torch.from_numpy(reference["pixel_values"])
        hidden, pooled = model.vision_model(pixels)
        compare("clip vision_last_hidden_state", hidden, reference["vision_last_hidden_state"])
        compare("clip vision_pooled", pooled, reference["vision_pooled"])
        compare("clip image_embeds", model.image_embeds(pixels), reference["image_embeds"])
        ids_list = expected["input_ids"]
        longest = max(len(i) for i in ids_list)
        ids = torch.tensor([i + [49407] * (longest - len(i)) for i in ids_list])
        lengths = torch.tensor([len(i) for i in ids_list])
        text_hidden, _ = model.text_model(ids, lengths)
        for t, n in enumerate(lengths.tolist()):
            compare(f"clip text_last_hidden_state {t}", text_hidden[t, :n], reference["text_last_hidden_state"][t, :n])
        text = model.text_embeds(ids, lengths)
        compare("clip text_embeds", text, reference["text_embeds"])
        logits = model.logit_scale.exp() * model.image_embeds(pixels) @ text.T
        compare("clip logits_per_image", logits, reference["logits_per_image"])


def check_blip(folder):
    config = json.load(open(os.path.join(folder, "config.json")))
    expected = json.load(open(os.path.join(folder, "expected.json")))
    reference = safetensors_io.load(os.path.join(folder, "reference.safetensors"))
    model = models.BlipForConditionalGeneration(config).eval()
    weights = safetensors_io.load(os.path.join(folder, "model.safetensors"))
    extra = models.load_state(model, weights)
    # this fixture's decoder weight is not the word embeddings: use it as the reference did
    model.text_decoder.untied_decoder_weight = torch.from_numpy(weights["text_decoder.cls.predictions.decoder.weight"])
    assert np.array_equal(weights["text_decoder.cls.predictions.decoder.bias"], weights["text_decoder.cls.predictions.bias"])
    assert set(extra) <= {
        "text_decoder.cls.predictions.decoder.weight",
        "text_decoder.cls.predictions.decoder.bias",
        "text_decoder.bert.embeddings.position_ids",
    }, extra
    start, end = expected["bos_token_id"], expected["sep_token_id"]
    with torch.no_grad():
        for i, name in enumerate(expected["images"]):
            pixels = torch.from_numpy(reference[f"pixel_values.{i}"])
            image = model.vision_model(pixels)
            compare(f"blip image_embeds {name}", image, reference[f"image_embeds.{i}"])
            logits = model.text_decoder(torch.tensor([[start]]), image)[0, -1]
            compare(f"blip first_step_logits {name}", logits, reference[f"first_step_logits.{i}"])
        for case in expected["cases"]:
            if case["generation"] != "greedy" or case["prompt"]:
                continue
            i = expected["images"].index(case["image"])
            pixels = torch.from_numpy(reference[f"pixel_values.{i}"])
            ids = model.greedy(pixels, start, end, case["params"]["max_length"])[0].tolist()
            if ids != case["ids"]:
                raise SystemExit(f"greedy caption of {case['image']}: {ids} != {case['ids']}")
            print(f"blip greedy caption {case['image']:18s} identical ({len(ids)} ids)")


def main():
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../shared/fixtures")
    torch.set_num_threads(2)
    check_clip(os.path.join(fixtures, "clip-tiny"))
    check_blip(os.path.join(fixtures, "blip-caption-tiny"))
    print("the training models compute what transformers computes")


if __name__ == "__main__":
    main()
