# Modelled on fundamentalvision/BEVFormer#136 (https://github.com/fundamentalvision/BEVFormer/issues/136:
# one sample per GPU under DDP while "the syncbatchnorm is not applied") and bytedance/ibot#15
# (https://github.com/bytedance/ibot/issues/15: "every processor (GPU) would save a checkpoint ...
# saved checkpoint can not be load by torch.load"). Fixed twin, as detectors on CPU do it: the
# backbone's BatchNorm is frozen (eval mode: running statistics, no batch statistics) and the head
# uses GroupNorm, whose statistics do not depend on the batch; rank 0 alone writes the checkpoint,
# each rank writes its own RNG state under its own name, and the sharded checkpoint goes through
# torch.distributed.checkpoint, which every rank must call.
import os
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Detector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images))


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 3, 16, 16), torch.randint(0, 4, (32,)))
sampler = DistributedSampler(data, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=2, sampler=sampler)
detector = Detector()
detector.backbone.requires_grad_(False)
model = DistributedDataParallel(detector)
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)
for epoch in range(2):
    sampler.set_epoch(epoch)
    model.train()
    detector.backbone[1].eval()  # frozen BatchNorm: running statistics only
    for images, labels in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    if rank == 0:
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                    "epoch": epoch}, "checkpoint.pt")
    torch.save(torch.get_rng_state(), f"rng_rank{rank}.pt")
    shared = [tempfile.mkdtemp(prefix="dcp") if rank == 0 else None]
    dist.broadcast_object_list(shared, src=0)
    dcp.save({"model": model.module.state_dict()}, checkpoint_id=os.path.join(shared[0], "step"))
    dist.barrier()
dist.destroy_process_group()
