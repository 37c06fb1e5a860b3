# Modelled on fundamentalvision/BEVFormer#136 (https://github.com/fundamentalvision/BEVFormer/issues/136:
# one sample per GPU under DDP while "the syncbatchnorm is not applied") and bytedance/ibot#15
# (https://github.com/bytedance/ibot/issues/15: "every processor (GPU) would save a checkpoint ...
# saved checkpoint can not be load by torch.load"): a detector-style network trains with two images
# per rank and plain BatchNorm2d, and every rank writes the checkpoint to the same file.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Detector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images))


dist.init_process_group("gloo")
torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 3, 16, 16), torch.randint(0, 4, (32,)))
sampler = DistributedSampler(data, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=2, sampler=sampler)
model = DistributedDataParallel(Detector())
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for images, labels in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), labels)  # expect: TG603
        loss.backward()
        optimizer.step()
    torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),  # expect: TG602
                "epoch": epoch}, "checkpoint.pt")
dist.destroy_process_group()
