"""A stand-in for the two names Florence-2's modeling code imports from timm (Debian 12 has no timm):
timm.models.layers.DropPath and trunc_normal_. Written for glimpse's Florence-2 peer; not timm's code."""
__version__ = "0.9.16"
