"""vocabularies.py — tokenizer files of our own for the demo models, in the
published formats: a BERT WordPiece vocab.txt (+ added_tokens.json) holding
the few words the pictures need, and a CLIP byte-level BPE vocab.json +
merges.txt whose merges are learned here so every word is one token. The
published vocabularies are not used."""
import json
import os

WORDS = ["a", "an", "the", "of", "red", "green", "blue", "yellow", "circle", "square", "triangle",
         "above", "below", "left", "right", "picture", "photo", "shape", "shapes", "and", "with", "on",
         "background", "two", "one"]

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def bert_files(folder):
    """Writes vocab.txt, added_tokens.json, special_tokens_map.json, tokenizer_config.json.
    Returns the token -> id map including [DEC] and [ENC]."""
    tokens = BERT_SPECIALS + WORDS
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in tokens))
    ids = {t: i for i, t in enumerate(tokens)}
    ids["[DEC]"], ids["[ENC]"] = len(tokens), len(tokens) + 1
    json.dump({"[DEC]": ids["[DEC]"], "[ENC]": ids["[ENC]"]}, open(os.path.join(folder, "added_tokens.json"), "w"))
    json.dump({"additional_special_tokens": ["[ENC]"], "bos_token": "[DEC]", "cls_token": "[CLS]",
               "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]", "unk_token": "[UNK]"},
              open(os.path.join(folder, "special_tokens_map.json"), "w"), indent=2)
    json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer", "processor_class": "BlipProcessor",
               "model_max_length": 512}, open(os.path.join(folder, "tokenizer_config.json"), "w"), indent=2)
    return ids


def bert_encode(ids, caption):
    """[DEC] words [SEP] for a caption of known words (BLIP's decoder input)."""
    return [ids["[DEC]"]] + [ids[w] for w in caption.split()] + [ids["[SEP]"]]


def byte_stand_ins():
    """GPT-2's printable stand-in character for each byte."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def learn_merges(words):
    """BPE learning on the word list until every word is one symbol."""
    stand = byte_stand_ins()
    split = {w: [stand[b] for b in w.encode()[:-1]] + [stand[w.encode()[-1]] + "</w>"] for w in words}
    merges = []
    while True:
        counts = {}
        for symbols in split.values():
            for pair in zip(symbols, symbols[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            return merges
        best = max(counts, key=lambda p: (counts[p], -len(merges)))  # most frequent, first seen on ties
        merges.append(best)
        for w, symbols in split.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            split[w] = out


def bpe(word, ranks, stand):
    """CLIP's BPE on one lowercase word (as clip_tokenizer.c does it)."""
    symbols = [stand[b] for b in word.encode()[:-1]] + [stand[word.encode()[-1]] + "</w>"]
    while len(symbols) > 1:
        pairs = [(ranks.get(p, 1 << 30), i) for i, p in enumerate(zip(symbols, symbols[1:]))]
        rank, _ = min(pairs)
        if rank == 1 << 30:
            break
        pair = next(p for p in zip(symbols, symbols[1:]) if ranks.get(p) == rank)
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
                out.append(symbols[i] + symbols[i + 1])
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


def clip_files(folder):
    """Writes vocab.json and merges.txt; returns (token -> id, start id, end id)."""
    stand = byte_stand_ins()
    merges = learn_merges(WORDS)
    vocab = {}
    for b in range(256):
        vocab[stand[b]] = len(vocab)
    for b in range(256):
        vocab[stand[b] + "</w>"] = len(vocab)
    for left, right in merges:
        if left + right not in vocab:
            vocab[left + right] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    ranks = {m: i for i, m in enumerate(merges)}
    for w in WORDS:
        assert bpe(w, ranks, stand) == [w + "</w>"], (w, bpe(w, ranks, stand))
    json.dump(vocab, open(os.path.join(folder, "vocab.json"), "w"), ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    json.dump({"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
               "unk_token": "<|endoftext|>"}, open(os.path.join(folder, "special_tokens_map.json"), "w"), indent=2)
    json.dump({"tokenizer_class": "CLIPTokenizer", "processor_class": "CLIPProcessor", "model_max_length": 32,
               "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
               "unk_token": "<|endoftext|>"}, open(os.path.join(folder, "tokenizer_config.json"), "w"), indent=2)
    return vocab, vocab["<|startoftext|>"], vocab["<|endoftext|>"]


def clip_encode(vocab, caption):
    return [vocab["<|startoftext|>"]] + [vocab[w + "</w>"] for w in caption.split()] + [vocab["<|endoftext|>"]]
