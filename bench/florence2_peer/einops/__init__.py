"""A stand-in for einops.rearrange with the two patterns Florence-2's DaViT uses (Debian 12 has no einops):
'b (h w) c -> b c h w' (h and w given) and 'b c h w -> b (h w) c'. Any other pattern is refused.
Written for glimpse's Florence-2 peer (bench/florence2_peer_setup.sh); not the einops project's code."""

__version__ = "0.8.0"


def rearrange(tensor, pattern, **axes):
    pattern = " ".join(pattern.split())
    if pattern == "b (h w) c -> b c h w":
        b, _, c = tensor.shape
        h, w = axes["h"], axes["w"]
        return tensor.reshape(b, h, w, c).permute(0, 3, 1, 2)
    if pattern == "b c h w -> b (h w) c":
        b, c, h, w = tensor.shape
        return tensor.permute(0, 2, 3, 1).reshape(b, h * w, c)
    raise NotImplementedError(f"einops stand-in: pattern {pattern!r}")
