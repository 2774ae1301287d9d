"""A model whose last call is the 1xN convolution CMSIS-NN refuses on MVE (stride 2 along W):
`cortexm reduce` must cut it out and fail the same way on the M55, and pass on the M7."""

import torch
from torch import nn


def model():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(4, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, (1, 3), stride=(1, 2), padding=(0, 1))).eval()
    x = torch.rand(1, 4, 1, 8).to(memory_format=torch.channels_last) * 2 - 1
    return net, (x,)
