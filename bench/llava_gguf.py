#!/usr/bin/env python3
"""llava_gguf.py SNAPSHOT OUT_DIR LLAMA_CPP [--f16] — a LLaVA snapshot (LlavaForConditionalGeneration as the hub
has it: safetensors, one file or shards, the older or the newer tensor names) as the two GGUF files llama.cpp's
LLaVA runs: OUT_DIR/text.gguf (the language model: llama or qwen2) and OUT_DIR/mmproj.gguf (the vision tower up to
its feature layer and the projector, llama.cpp's "clip" file). For bench/llava.sh, which times glimpse and
llama.cpp on the same weights; not part of glimpse. It writes the files with the gguf package of the llama.cpp
checkout given (LLAMA_CPP/gguf-py; no PyTorch, no transformers), and the vocabulary from tokenizer.model
(SentencePiece, Debian's python3-sentencepiece) or vocab.json and merges.txt (byte-level BPE)."""
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(folder):
    """{name: array} of every tensor in folder's model.safetensors (or its shards), memory-mapped."""
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else \
        ["model.safetensors"]
    tensors = {}
    for name in files:
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            length = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(length))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
        for key, entry in header.items():
            if key == "__metadata__":
                continue
            start, end = entry["data_offsets"]
            raw = data[start:end]
            kind = entry["dtype"]
            if kind == "F32":
                array = raw.view(np.float32)
            elif kind == "F16":
                array = raw.view(np.float16)
            elif kind == "BF16":  # widened: numpy has no bfloat16
                array = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                raise SystemExit(f"{path}: {key} is {kind}; this script takes F32, F16 and BF16")
            tensors[key] = array.reshape(entry["shape"])
    return tensors


def split_parts(tensors):
    """The language model's, the vision tower's and the projector's tensors under names without their prefix,
    whichever layout (language_model.model.* and language_model.lm_head, or model.language_model.* and
    lm_head)."""
    text, vision, projector = {}, {}, {}
    for name, array in tensors.items():
        for prefix, part in (("language_model.model.", text), ("model.language_model.", text),
                             ("vision_tower.vision_model.", vision), ("model.vision_tower.vision_model.", vision),
                             ("multi_modal_projector.", projector), ("model.multi_modal_projector.", projector)):
            if name.startswith(prefix):
                part[name[len(prefix):]] = array
                break
        else:
            if name in ("language_model.lm_head.weight", "lm_head.weight"):
                text["lm_head.weight"] = array
    return text, vision, projector


def rope_halves_to_pairs(weight, heads):
    """llama's q and k rows from transformers' rotate-half order (each head's first half, then its second) to
    the interleaved pairs llama.cpp's llama architecture rotates (what its own converter does)."""
    return weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(1, 2) \
        .reshape(weight.shape)


def vocabulary(folder, size):
    """(tokenizer model, tokens, scores, types, merges) for a vocabulary of `size` entries (the embedding's rows:
    ids past the tokenizer's are padding)."""
    import gguf
    tokens, scores, types, merges = [], [], [], []
    model_path = os.path.join(folder, "tokenizer.model")
    if os.path.exists(model_path):
        import sentencepiece
        processor = sentencepiece.SentencePieceProcessor(model_file=model_path)
        for i in range(processor.vocab_size()):
            tokens.append(processor.id_to_piece(i))
            scores.append(processor.get_score(i))
            types.append(gguf.TokenType.CONTROL if processor.is_control(i) else
                         gguf.TokenType.UNKNOWN if processor.is_unknown(i) else
                         gguf.TokenType.BYTE if processor.is_byte(i) else gguf.TokenType.NORMAL)
        kind = "llama"
    else:
        vocab = json.load(open(os.path.join(folder, "vocab.json"), encoding="utf-8"))
        by_id = sorted(vocab.items(), key=lambda item: item[1])
        tokens = [token for token, _ in by_id]
        scores = [0.0] * len(tokens)
        types = [gguf.TokenType.NORMAL] * len(tokens)
        with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
            merges = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
        if not merges and "!!" in vocab:  # glimpse-make-model's random vocabularies have none; llama.cpp needs some
            merges = ["! !"]
        kind = "gpt2"
    added = os.path.join(folder, "added_tokens.json")
    if os.path.exists(added):
        for token, token_id in sorted(json.load(open(added, encoding="utf-8")).items(), key=lambda item: item[1]):
            while len(tokens) < token_id:
                tokens.append(f"[PAD{len(tokens)}]"), scores.append(0.0), types.append(gguf.TokenType.UNUSED)
            if token_id == len(tokens):
                tokens.append(token), scores.append(0.0), types.append(gguf.TokenType.USER_DEFINED)
    while len(tokens) < size:
        tokens.append(f"[PAD{len(tokens)}]"), scores.append(0.0), types.append(gguf.TokenType.UNUSED)
    return kind, tokens[:size], scores[:size], types[:size], merges


def write_text(folder, config, text, out, f16):
    import gguf
    qwen2 = config["text_config"].get("model_type") == "qwen2"
    # what LlamaConfig and Qwen2Config give where the published configs leave sizes out (llava-1.5's does)
    c = {"hidden_size": 4096, "intermediate_size": 22016 if qwen2 else 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, **config["text_config"]}
    heads, kv_heads = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hidden, layers = c["hidden_size"], c["num_hidden_layers"]
    arch = "qwen2" if qwen2 else "llama"
    writer = gguf.GGUFWriter(out, arch)
    writer.add_name("glimpse bench " + os.path.basename(os.path.normpath(folder)))
    writer.add_context_length(c.get("max_position_embeddings", 32768 if qwen2 else 2048))
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(c["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_rope_freq_base(float(c.get("rope_theta", 10000.0)))  # LlamaConfig's and Qwen2Config's default
    writer.add_layer_norm_rms_eps(float(c.get("rms_norm_eps", 1e-6)))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    kind, tokens, scores, types, merges = vocabulary(folder, text["embed_tokens.weight"].shape[0])
    writer.add_tokenizer_model(kind)
    if kind == "gpt2":
        writer.add_tokenizer_pre("qwen2")
        writer.add_token_merges(merges)
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    generation = os.path.join(folder, "generation_config.json")
    ends = json.load(open(generation)).get("eos_token_id") if os.path.exists(generation) else None
    ends = ends if isinstance(ends, list) else [ends] if ends is not None else []
    if ends:
        writer.add_eos_token_id(int(ends[0]))
    if not qwen2:
        writer.add_bos_token_id(1)
    matrix = np.float16 if f16 else np.float32

    def put(name, array, is_matrix):
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=matrix if is_matrix else np.float32))

    put("token_embd.weight", text["embed_tokens.weight"], True)
    put("output_norm.weight", text["norm.weight"], False)
    head = text.get("lm_head.weight")
    if head is not None and not c.get("tie_word_embeddings", False):  # tied: llama.cpp reads token_embd
        put("output.weight", head, True)
    for layer in range(layers):
        source, target = f"layers.{layer}.", f"blk.{layer}."
        q, k = text[source + "self_attn.q_proj.weight"], text[source + "self_attn.k_proj.weight"]
        if not qwen2:
            q, k = rope_halves_to_pairs(np.asarray(q), heads), rope_halves_to_pairs(np.asarray(k), kv_heads)
        put(target + "attn_q.weight", q, True)
        put(target + "attn_k.weight", k, True)
        put(target + "attn_v.weight", text[source + "self_attn.v_proj.weight"], True)
        put(target + "attn_output.weight", text[source + "self_attn.o_proj.weight"], True)
        if qwen2:
            for letter in "qkv":
                put(target + f"attn_{letter}.bias", text[source + f"self_attn.{letter}_proj.bias"], False)
        put(target + "attn_norm.weight", text[source + "input_layernorm.weight"], False)
        put(target + "ffn_norm.weight", text[source + "post_attention_layernorm.weight"], False)
        put(target + "ffn_gate.weight", text[source + "mlp.gate_proj.weight"], True)
        put(target + "ffn_up.weight", text[source + "mlp.up_proj.weight"], True)
        put(target + "ffn_down.weight", text[source + "mlp.down_proj.weight"], True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_mmproj(folder, config, vision, projector, out, f16):
    import gguf
    v = config["vision_config"]
    layers = v["num_hidden_layers"]
    feature = config.get("vision_feature_layer", -2)
    kept = layers + 1 + feature if feature < 0 else feature  # the blocks whose output the projector reads
    writer = gguf.GGUFWriter(out, "clip")
    writer.add_bool("clip.has_text_encoder", False)
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.has_llava_projector", True)
    writer.add_string("clip.projector_type", "mlp")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    writer.add_name("glimpse bench " + os.path.basename(os.path.normpath(folder)) + " vision")
    writer.add_uint32("clip.vision.image_size", v["image_size"])
    writer.add_uint32("clip.vision.patch_size", v["patch_size"])
    writer.add_uint32("clip.vision.embedding_length", v["hidden_size"])
    writer.add_uint32("clip.vision.feed_forward_length", v["intermediate_size"])
    writer.add_uint32("clip.vision.projection_dim", projector["linear_2.weight"].shape[0])  # the text's hidden size
    writer.add_uint32("clip.vision.attention.head_count", v["num_attention_heads"])
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", float(v.get("layer_norm_eps", 1e-5)))
    # llama.cpp's clip.cpp runs block_count - 1 blocks for a LLaVA projector: one more is written (the next block,
    # or the last again where the projector reads the last: never run)
    writer.add_uint32("clip.vision.block_count", kept + 1)
    processor = json.load(open(os.path.join(folder, "preprocessor_config.json")))
    writer.add_array("clip.vision.image_mean", [float(x) for x in processor["image_mean"]])
    writer.add_array("clip.vision.image_std", [float(x) for x in processor["image_std"]])
    writer.add_bool("clip.use_gelu", v.get("hidden_act", "quick_gelu") in ("gelu", "gelu_pytorch_tanh"))
    matrix = np.float16 if f16 else np.float32

    def put(name, array, is_matrix):
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=matrix if is_matrix else np.float32))

    writer.add_tensor("v.patch_embd.weight", np.ascontiguousarray(vision["embeddings.patch_embedding.weight"],
                                                                  dtype=np.float16))
    if "embeddings.patch_embedding.bias" in vision:
        put("v.patch_embd.bias", vision["embeddings.patch_embedding.bias"], False)
    if "embeddings.class_embedding" in vision:
        put("v.class_embd", vision["embeddings.class_embedding"], False)
    put("v.position_embd.weight", vision["embeddings.position_embedding.weight"], True)
    if "pre_layrnorm.weight" in vision:  # CLIP's name, misspelt as transformers has it
        put("v.pre_ln.weight", vision["pre_layrnorm.weight"], False)
        put("v.pre_ln.bias", vision["pre_layrnorm.bias"], False)
    for layer in range(kept + 1):
        source, target = f"encoder.layers.{min(layer, layers - 1)}.", f"v.blk.{layer}."
        for name, short in (("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
                            ("self_attn.v_proj", "attn_v"), ("self_attn.out_proj", "attn_out"),
                            ("mlp.fc1", "ffn_down"), ("mlp.fc2", "ffn_up")):  # llama.cpp's names for fc1 and fc2
            put(target + short + ".weight", vision[source + name + ".weight"], True)
            put(target + short + ".bias", vision[source + name + ".bias"], False)
        for name, short in (("layer_norm1", "ln1"), ("layer_norm2", "ln2")):
            put(target + short + ".weight", vision[source + name + ".weight"], False)
            put(target + short + ".bias", vision[source + name + ".bias"], False)
    for index, name in ((0, "linear_1"), (2, "linear_2")):
        put(f"mm.{index}.weight", projector[name + ".weight"], True)
        put(f"mm.{index}.bias", projector[name + ".bias"], False)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 3:
        raise SystemExit(__doc__)
    folder, out, llama_cpp = args
    sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
    f16 = "--f16" in argv
    config = json.load(open(os.path.join(folder, "config.json")))
    text, vision, projector = split_parts(read_safetensors(folder))
    os.makedirs(out, exist_ok=True)
    write_text(folder, config, text, os.path.join(out, "text.gguf"), f16)
    write_mmproj(folder, config, vision, projector, os.path.join(out, "mmproj.gguf"), f16)
    print(f"{out}/text.gguf and {out}/mmproj.gguf written")


if __name__ == "__main__":
    main(sys.argv[1:])
