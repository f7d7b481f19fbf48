"""models.py — CLIPModel and BlipForConditionalGeneration written in plain
torch with exactly the parameter names, shapes and arithmetic of Hugging Face
transformers, so that a trained state dict is a checkpoint glimpse (and
transformers) load as it is. check_fixtures.py proves them against the
reference outputs before any training."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def activation(name):
    if name == "quick_gelu":
        return lambda x: x * torch.sigmoid(1.702 * x)
    if name == "gelu":
        return F.gelu
    raise ValueError(f"activation {name}")


def attention(q, k, v, heads, mask=None):
    """q [B, Tq, H], k and v [B, Tk, H] -> [B, Tq, H]."""
    b, tq, h = q.shape
    tk = k.shape[1]
    d = h // heads
    q = q.view(b, tq, heads, d).transpose(1, 2)
    k = k.view(b, tk, heads, d).transpose(1, 2)
    v = v.view(b, tk, heads, d).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    if mask is not None:
        scores = scores + mask
    out = scores.softmax(-1) @ v
    return out.transpose(1, 2).reshape(b, tq, h)


# ------------------------------------------------------------------ CLIP


class ClipAttention(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(h, h) for _ in range(4))

    def forward(self, x, mask=None):
        return self.out_proj(attention(self.q_proj(x), self.k_proj(x), self.v_proj(x), self.heads, mask))


class Mlp(nn.Module):
    def __init__(self, h, inter, act):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(h, inter), nn.Linear(inter, h)
        self.act = activation(act)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class ClipLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c.get("layer_norm_eps", 1e-5)
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(h, eps=eps), nn.LayerNorm(h, eps=eps)
        self.self_attn = ClipAttention(h, c["num_attention_heads"])
        self.mlp = Mlp(h, c["intermediate_size"], c.get("hidden_act", "quick_gelu"))

    def forward(self, x, mask=None):
        x = x + self.self_attn(self.layer_norm1(x), mask)
        return x + self.mlp(self.layer_norm2(x))


class Layers(nn.Module):
    def __init__(self, make, n):
        super().__init__()
        self.layers = nn.ModuleList(make() for _ in range(n))


class ClipVisionEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, p, s = c["hidden_size"], c["patch_size"], c["image_size"]
        self.class_embedding = nn.Parameter(torch.zeros(h))
        self.patch_embedding = nn.Conv2d(3, h, p, p, bias=False)
        self.position_embedding = nn.Embedding((s // p) ** 2 + 1, h)

    def forward(self, pixels):
        patches = self.patch_embedding(pixels).flatten(2).transpose(1, 2)
        cls = self.class_embedding.expand(pixels.shape[0], 1, -1)
        return torch.cat([cls, patches], 1) + self.position_embedding.weight[None]


class ClipVision(nn.Module):
    def __init__(self, c):
        super().__init__()
        eps = c.get("layer_norm_eps", 1e-5)
        self.embeddings = ClipVisionEmbeddings(c)
        self.pre_layrnorm = nn.LayerNorm(c["hidden_size"], eps=eps)
        self.encoder = Layers(lambda: ClipLayer(c), c["num_hidden_layers"])
        self.post_layernorm = nn.LayerNorm(c["hidden_size"], eps=eps)

    def forward(self, pixels):
        x = self.pre_layrnorm(self.embeddings(pixels))
        for layer in self.encoder.layers:
            x = layer(x)
        return x, self.post_layernorm(x[:, 0])


class ClipTextEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.token_embedding = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.position_embedding = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])


class ClipText(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.eos = c.get("eos_token_id", 2)
        self.embeddings = ClipTextEmbeddings(c)
        self.encoder = Layers(lambda: ClipLayer(c), c["num_hidden_layers"])
        self.final_layer_norm = nn.LayerNorm(c["hidden_size"], eps=c.get("layer_norm_eps", 1e-5))

    def forward(self, ids, lengths):
        b, t = ids.shape
        x = self.embeddings.token_embedding(ids) + self.embeddings.position_embedding.weight[:t][None]
        causal = torch.full((t, t), float("-inf")).triu(1)
        pad = torch.arange(t)[None, :] >= lengths[:, None]
        mask = causal[None, None] + torch.where(pad, float("-inf"), 0.0)[:, None, None, :]
        for layer in self.encoder.layers:
            x = layer(x, mask)
        x = self.final_layer_norm(x)
        if self.eos == 2:
            position = ids.argmax(-1)
        else:
            position = (ids == self.eos).int().argmax(-1)
        return x, x[torch.arange(b), position]


class CLIPModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        v, t = config["vision_config"], config["text_config"]
        p = config["projection_dim"]
        self.vision_model = ClipVision(v)
        self.text_model = ClipText(t)
        self.visual_projection = nn.Linear(v["hidden_size"], p, bias=False)
        self.text_projection = nn.Linear(t["hidden_size"], p, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(config.get("logit_scale_init_value", 2.6592)))

    def image_embeds(self, pixels):
        return F.normalize(self.visual_projection(self.vision_model(pixels)[1]), dim=-1)

    def text_embeds(self, ids, lengths):
        return F.normalize(self.text_projection(self.text_model(ids, lengths)[1]), dim=-1)


# ------------------------------------------------------------------ BLIP


class BlipAttention(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(h, 3 * h)
        self.projection = nn.Linear(h, h)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        return self.projection(attention(q, k, v, self.heads))


class BlipVisionLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c.get("layer_norm_eps", 1e-5)
        self.self_attn = BlipAttention(h, c["num_attention_heads"])
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(h, eps=eps), nn.LayerNorm(h, eps=eps)
        self.mlp = Mlp(h, c["intermediate_size"], c.get("hidden_act", "gelu"))

    def forward(self, x):
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class BlipVisionEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, p, s = c["hidden_size"], c["patch_size"], c["image_size"]
        self.class_embedding = nn.Parameter(torch.zeros(1, 1, h))
        self.patch_embedding = nn.Conv2d(3, h, p, p)
        self.position_embedding = nn.Parameter(torch.zeros(1, (s // p) ** 2 + 1, h))

    def forward(self, pixels):
        patches = self.patch_embedding(pixels).flatten(2).transpose(1, 2)
        cls = self.class_embedding.expand(pixels.shape[0], 1, -1)
        return torch.cat([cls, patches], 1) + self.position_embedding


class BlipVision(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = BlipVisionEmbeddings(c)
        self.encoder = Layers(lambda: BlipVisionLayer(c), c["num_hidden_layers"])
        self.post_layernorm = nn.LayerNorm(c["hidden_size"], eps=c.get("layer_norm_eps", 1e-5))

    def forward(self, pixels):
        x = self.embeddings(pixels)
        for layer in self.encoder.layers:
            x = layer(x)
        return self.post_layernorm(x)


class BertSelf(nn.Module):
    def __init__(self, h, kv):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(kv, h), nn.Linear(kv, h)


class BertOutput(nn.Module):
    def __init__(self, inner, h, eps):
        super().__init__()
        self.dense = nn.Linear(inner, h)
        self.LayerNorm = nn.LayerNorm(h, eps=eps)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class BertAttention(nn.Module):
    def __init__(self, h, kv, heads, eps):
        super().__init__()
        self.heads = heads
        setattr(self, "self", BertSelf(h, kv))
        self.output = BertOutput(h, h, eps)

    def forward(self, x, memory, mask=None):
        s = getattr(self, "self")
        return self.output(attention(s.query(x), s.key(memory), s.value(memory), self.heads, mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, h, inter):
        super().__init__()
        self.dense = nn.Linear(h, inter)


class BertLayer(nn.Module):
    def __init__(self, c, encoder_hidden):
        super().__init__()
        h, eps, heads = c["hidden_size"], c.get("layer_norm_eps", 1e-12), c["num_attention_heads"]
        self.attention = BertAttention(h, h, heads, eps)
        self.crossattention = BertAttention(h, encoder_hidden, heads, eps)
        self.intermediate = BertIntermediate(h, c["intermediate_size"])
        self.output = BertOutput(c["intermediate_size"], h, eps)
        self.act = activation(c.get("hidden_act", "gelu"))

    def forward(self, x, image, mask):
        x = self.attention(x, x, mask)
        x = self.crossattention(x, image)
        return self.output(self.act(self.intermediate.dense(x)), x)


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c.get("layer_norm_eps", 1e-12))

    def forward(self, ids):
        positions = self.position_embeddings.weight[: ids.shape[1]][None]
        return self.LayerNorm(self.word_embeddings(ids) + positions)


class BertModel(nn.Module):
    def __init__(self, c, encoder_hidden):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList(BertLayer(c, encoder_hidden) for _ in range(c["num_hidden_layers"]))

    def forward(self, ids, image):
        t = ids.shape[1]
        mask = torch.full((t, t), float("-inf")).triu(1)[None, None]
        x = self.embeddings(ids)
        for layer in self.encoder.layer:
            x = layer(x, image, mask)
        return x


class PredictionTransform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c.get("layer_norm_eps", 1e-12))


class Predictions(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = PredictionTransform(c)
        self.bias = nn.Parameter(torch.zeros(c["vocab_size"]))
        self.act = activation(c.get("hidden_act", "gelu"))


class TextDecoder(nn.Module):
    def __init__(self, c, encoder_hidden):
        super().__init__()
        self.bert = BertModel(c, encoder_hidden)
        self.cls = nn.Module()
        self.cls.predictions = Predictions(c)

    def forward(self, ids, image):
        x = self.bert(ids, image)
        p = self.cls.predictions
        x = p.transform.LayerNorm(p.act(p.transform.dense(x)))
        # the output embedding is tied to the input one unless a checkpoint
        # brings its own decoder weight (as the randomised fixture does)
        weight = getattr(self, "untied_decoder_weight", None)
        if weight is None:
            weight = self.bert.embeddings.word_embeddings.weight
        return x @ weight.T + p.bias


class BlipForConditionalGeneration(nn.Module):
    def __init__(self, config):
        super().__init__()
        v, t = config["vision_config"], config["text_config"]
        self.vision_model = BlipVision(v)
        self.text_decoder = TextDecoder(t, t.get("encoder_hidden_size", v["hidden_size"]))

    def logits(self, pixels, ids):
        return self.text_decoder(ids, self.vision_model(pixels))

    @torch.no_grad()
    def greedy(self, pixels, start, end, max_length):
        image = self.vision_model(pixels)
        ids = torch.full((pixels.shape[0], 1), start, dtype=torch.long)
        done = torch.zeros(pixels.shape[0], dtype=torch.bool)
        while ids.shape[1] < max_length and not done.all():
            nxt = self.text_decoder(ids, image)[:, -1].argmax(-1)
            nxt = torch.where(done, torch.zeros_like(nxt), nxt)
            ids = torch.cat([ids, nxt[:, None]], 1)
            done |= nxt == end
        return ids


def load_state(model, tensors, strict=True):
    """Loads numpy tensors by name; returns names the model did not take."""
    own = model.state_dict()
    missing = [n for n in own if n not in tensors]
    if strict and missing:
        raise KeyError(f"missing tensors: {missing[:5]}")
    with torch.no_grad():
        for name, value in own.items():
            if name in tensors:
                value.copy_(torch.from_numpy(tensors[name]).reshape(value.shape))
    return [n for n in tensors if n not in own]
