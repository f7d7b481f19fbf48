"""florence2_torch.py — PyTorch's side of bench/florence2.sh: Florence-2 run by its own code (Microsoft's
modeling_florence2.py and processing_florence2.py) under transformers 4.40.2, the fixtures' reference setup
(../shared/fixtures/README.md, "Rebuilding the reference"), laid out by bench/florence2_peer_setup.sh in
GLIMPSE_FLORENCE2_PEER (default /work/peers/florence2). Run it with Debian's /usr/bin/python3 (bench/peer_env.sh's
peer_python); it puts PEER/site on the path itself.

  florence2_torch.py check FIXTURE [--cases N]
      the reference's search on a fixture folder (florence2-tiny): its expected.json cases' ids, texts and
      parsed results must come out the same (the first N cases of each task and setting; default all)
  florence2_torch.py make CONFIG PREPROCESSOR TOKENIZER_FOLDER OUT [--seed S]
      full-size random Florence-2 weights both runtimes read: Florence2ForConditionalGeneration(config) with
      the remote code's own initialisation (seeded), the parameters it leaves uninitialised (image_projection,
      torch.empty) or at unit scale (the 2-D position tables, nn.Embedding's default) drawn at 0.02 as the rest;
      saved as torch.save(state_dict) → OUT/pytorch_model.bin (float32), with CONFIG as config.json, PREPROCESSOR
      as preprocessor_config.json, and the tokenizer files and generation_config.json copied from
      TOKENIZER_FOLDER (florence2-tiny's are byte-identical to the hub's)
  florence2_torch.py time MODEL PICTURE THREADS CALLS TASK:BEAMS:MAX_TOKENS:MIN_TOKENS...
      loads MODEL with from_pretrained (timed), makes one untimed call of the first task, then CALLS timed calls
      of each: PIL's Image.open of the file, the processor, generate (num_beams, max_new_tokens, min_new_tokens,
      do_sample false), batch_decode and post_process_generation, timed with time.perf_counter; JSON Lines as
      bench/florence2_call.c prints them.
"""
import json
import os
import shutil
import sys
import time

PEER = os.environ.get("GLIMPSE_FLORENCE2_PEER", "/work/peers/florence2")
sys.path.insert(0, os.path.join(PEER, "site"))

import torch  # noqa: E402
from PIL import Image  # noqa: E402

TOKENIZER_FILES = ("vocab.json", "tokenizer.json", "tokenizer_config.json")


def merges_file(folder):
    """BartTokenizer needs merges.txt; the hub's Florence-2 has its merges only in tokenizer.json (model.merges,
    "a b" strings in rank order). Written once under PEER/tmp, named by the tokenizer.json's size and time."""
    source = os.path.join(folder, "tokenizer.json")
    stat = os.stat(source)
    path = os.path.join(PEER, "tmp", f"merges-{stat.st_size}-{int(stat.st_mtime)}.txt")
    if not os.path.exists(path):
        merges = json.load(open(source, encoding="utf-8"))["model"]["merges"]
        merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".part", "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
        os.replace(path + ".part", path)
    return path


def load(folder):
    """The model (float32, eval, eager attention) and the processor, as the fixtures' README builds them."""
    from transformers import BartTokenizer, CLIPImageProcessor
    from florence2 import Florence2ForConditionalGeneration, Florence2Processor
    model = Florence2ForConditionalGeneration.from_pretrained(folder).eval()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    tokenizer = BartTokenizer(os.path.join(folder, "vocab.json"), merges_file(folder), model_max_length=1024)
    processor = Florence2Processor(CLIPImageProcessor.from_pretrained(folder), tokenizer)
    return model, processor


def run_task(model, processor, picture, task, text_input=None, **params):
    """One whole call, as the model card runs it: ids, text, parsed result."""
    image = Image.open(picture)
    image.load()
    prompt = task if text_input is None else task + text_input
    inputs = processor(text=prompt, images=image, return_tensors="pt")
    with torch.no_grad():
        ids = model.generate(input_ids=inputs["input_ids"], pixel_values=inputs["pixel_values"], do_sample=False,
                             **params)
    text = processor.batch_decode(ids, skip_special_tokens=False, spaces_between_special_tokens=False)[0]
    parsed = processor.post_process_generation(text, task=task, image_size=(image.width, image.height))
    run_task.prompt_tokens = inputs["input_ids"].shape[1]
    return ids[0].tolist(), text, parsed


def check(fixture, limit):
    torch.set_num_threads(1)
    expected = json.load(open(os.path.join(fixture, "expected.json"), encoding="utf-8"))
    images = os.path.join(os.path.dirname(os.path.abspath(fixture)), "images")
    model, processor = load(fixture)
    seen, checked, failed = {}, 0, []
    for index, case in enumerate(expected["cases"]):
        prompt = expected["prompts"][case["prompt_index"]]
        key = (prompt["task"], case["setting"])
        seen[key] = seen.get(key, 0) + 1
        if limit and seen[key] > limit:
            continue
        picture = os.path.join(images, expected["images"][prompt["image"]]["file"])
        ids, text, parsed = run_task(model, processor, picture, prompt["task"], prompt["text_input"], **{
            k: v for k, v in case["params"].items() if k != "do_sample"})
        checked += 1
        wrong = [what for what, got, want in (("ids", ids, case["ids"]), ("text", text, case["text"]),
                                              ("parsed", parsed, case["parsed"])) if got != want]
        if wrong:
            failed.append((index, prompt["task"], case["setting"], wrong))
            print(f"case {index} {prompt['task']} {case['setting']}: {', '.join(wrong)} differ\n"
                  f"  got  {ids}\n  want {case['ids']}", file=sys.stderr)
    settings = sorted({s for _, s in seen})
    print(f"check: {checked - len(failed)} of {checked} cases of {os.path.basename(os.path.normpath(fixture))} "
          f"({len(seen) // len(settings)} tasks × {', '.join(settings)}, {len(expected['images'])} pictures) give "
          f"the reference's ids, text and parsed result")
    if failed:
        sys.exit(1)


def make(config, preprocessor, tokenizer_folder, out, seed):
    from florence2 import Florence2Config, Florence2ForConditionalGeneration
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(config, os.path.join(out, "config.json"))
    shutil.copyfile(preprocessor, os.path.join(out, "preprocessor_config.json"))
    for name in TOKENIZER_FILES + ("generation_config.json",):
        shutil.copyfile(os.path.join(tokenizer_folder, name), os.path.join(out, name))
    torch.manual_seed(seed)
    model = Florence2ForConditionalGeneration(Florence2Config.from_pretrained(out)).eval()
    with torch.no_grad():
        torch.nn.init.trunc_normal_(model.image_projection, std=0.02)
        model.image_pos_embed.row_embeddings.weight.normal_(0, 0.02)
        model.image_pos_embed.column_embeddings.weight.normal_(0, 0.02)
    state = model.state_dict()
    bad = [name for name, tensor in state.items() if not torch.isfinite(tensor).all()]
    if bad:
        sys.exit(f"florence2_torch.py make: non-finite values in {bad}")
    torch.save(state, os.path.join(out, "pytorch_model.bin.part"))
    os.replace(os.path.join(out, "pytorch_model.bin.part"), os.path.join(out, "pytorch_model.bin"))
    parameters = sum(p.numel() for p in model.parameters())
    print(f"make: {out}: {parameters / 1e6:.1f} M parameters, {len(state)} tensors, float32")


def parse_calls(specs):
    calls = []
    for spec in specs:
        task, beams, most, least = spec.rsplit(":", 3)
        calls.append((task, int(beams), int(most), int(least)))
    return calls


def time_calls(folder, picture, threads, count, specs):
    torch.set_num_threads(threads)
    calls = parse_calls(specs)
    start = time.perf_counter()
    model, processor = load(folder)
    print(json.dumps({"runtime": "pytorch", "precision": "f32", "stage": "load",
                      "ms": round((time.perf_counter() - start) * 1e3, 3), "torch": torch.__version__}),
          flush=True)

    def one(task, beams, most, least):
        start = time.perf_counter()
        ids, _, parsed = run_task(model, processor, picture, task, num_beams=beams, max_new_tokens=most,
                                  min_new_tokens=least)
        return time.perf_counter() - start, ids, parsed

    one(*calls[0])  # warm-up, untimed
    for task, beams, most, least in calls:
        for r in range(count):
            seconds, ids, parsed = one(task, beams, most, least)
            print(json.dumps({"runtime": "pytorch", "precision": "f32", "task": task, "beams": beams,
                              "max_tokens": most, "min_tokens": least, "call": r,
                              "ms": round(seconds * 1e3, 3), "prompt_tokens": run_task.prompt_tokens, "ids": ids,
                              "json": json.dumps(parsed, separators=(",", ":"))}), flush=True)


def main(argv):
    if len(argv) >= 2 and argv[0] == "check":
        limit = int(argv[argv.index("--cases") + 1]) if "--cases" in argv else 0
        check(argv[1], limit)
    elif len(argv) >= 5 and argv[0] == "make":
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
        make(argv[1], argv[2], argv[3], argv[4], seed)
    elif len(argv) >= 6 and argv[0] == "time":
        time_calls(argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
