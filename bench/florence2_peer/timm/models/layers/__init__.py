"""timm.models.layers stand-in: DropPath (stochastic depth, which is the identity in eval mode, the only mode the
peer runs; in training it drops whole samples' residual branches as timm's does) and trunc_normal_
(= torch.nn.init.trunc_normal_, timm's own is the same truncated normal)."""
import torch
from torch import nn


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    return nn.init.trunc_normal_(tensor, mean=mean, std=std, a=a, b=b)


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0, scale_by_keep=True):
        super().__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        if self.drop_prob == 0.0 or not self.training:
            return x
        keep = 1 - self.drop_prob
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        if self.scale_by_keep and keep > 0.0:
            mask.div_(keep)
        return x * mask
