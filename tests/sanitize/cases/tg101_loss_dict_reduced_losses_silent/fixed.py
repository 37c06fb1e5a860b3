# Modelled on GitHub rwightman/efficientdet-pytorch#30 ("Compute loss on validation",
# https://github.com/rwightman/efficientdet-pytorch/issues/30): a detector bench returns its
# losses in training mode and its detections in eval mode (`if not self.training:` picks the
# output), so computing the validation loss means keeping train mode under torch.no_grad(). The
# losses are reduced to numbers inside the training branch (`.mean()`, `torch.mean(...)`, a
# per-anchor `.sum(-1)`), which takes no statistics that normalize anything. The net uses
# GroupNorm and no dropout: nothing in it depends on the mode, and two validation passes give
# the same losses. A correct program: silent.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(7)


class TinyDet(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.GroupNorm(4, 16), nn.SiLU())
        self.cls = nn.Conv2d(16, num_classes, 1)
        self.box = nn.Conv2d(16, 4, 1)

    def forward(self, x):
        f = self.body(x)
        return self.cls(f).flatten(2).transpose(1, 2), self.box(f).flatten(2).transpose(1, 2)


class DetBench(nn.Module):
    def __init__(self, net, alpha=0.25):
        super().__init__()
        self.net, self.alpha = net, alpha

    def forward(self, images, cls_targets=None, box_targets=None):
        cls_out, box_out = self.net(images)
        if not self.training:
            scores, labels = cls_out.sigmoid().max(-1)
            return torch.cat([box_out, scores[..., None], labels[..., None].float()], -1)
        ce = F.binary_cross_entropy_with_logits(cls_out, cls_targets, reduction="none")
        p_t = torch.exp(-ce)
        class_loss = (self.alpha * (1 - p_t) ** 2 * ce).mean()
        box_loss = torch.mean(F.smooth_l1_loss(box_out, box_targets, reduction="none").sum(-1))
        return {"loss": class_loss + 50 * box_loss, "class_loss": class_loss,
                "box_loss": box_loss}


def batch(n=4):
    images = torch.randn(n, 3, 16, 16)
    cls_targets = (torch.rand(n, 64, 3) > 0.9).float()
    return images, cls_targets, torch.rand(n, 64, 4)


bench = DetBench(TinyDet())
optimizer = torch.optim.AdamW(bench.parameters(), lr=1e-3)
train_batches, val_batch = [batch() for _ in range(4)], batch()
for epoch in range(3):
    bench.train()
    for images, cls_targets, box_targets in train_batches:
        loss = bench(images, cls_targets, box_targets)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():  # train mode kept on purpose: only it returns the losses
        first = {k: v.item() for k, v in bench(*val_batch).items()}
        second = {k: v.item() for k, v in bench(*val_batch).items()}
    assert first == second
    print(f"epoch {epoch}: val loss {first['loss']:.4f}")
bench.eval()
with torch.no_grad():
    print("detections", tuple(bench(val_batch[0]).shape))
