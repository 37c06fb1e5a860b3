# Modelled on GitHub CosmiQ/solaris#414 (https://github.com/CosmiQ/solaris/issues/414): an
# inference routine does not use torch.no_grad() properly, so PyTorch records graphs for the whole
# inference and memory grows. Here `torch.no_grad()` stands alone as a statement: the context it
# makes is never entered, grad stays on, and that statement is the line to change.
import torch
from torch import nn

torch.manual_seed(2)
segmenter = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 2, 1))


def infer(model, tiles):
    model.eval()
    torch.no_grad()  # expect: TG103
    masks = []
    for tile in tiles:
        masks.append(model(tile).argmax(1))
    return masks


out = infer(segmenter, [torch.rand(1, 3, 16, 16) for _ in range(3)])
print(len(out), tuple(out[0].shape))
