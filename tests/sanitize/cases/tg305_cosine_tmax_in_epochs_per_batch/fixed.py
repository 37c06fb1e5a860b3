# Modelled on konstmish/prodigy#4 (https://github.com/konstmish/prodigy/issues/4): a config gives
# CosineAnnealingLR T_max=num_train_epochs while the training loop steps the scheduler after every
# batch, so the cosine runs its whole course in the first few batches and the learning rate then
# swings between its maximum and eta_min for the rest of training. The length belongs in batches.
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {
    "num_train_epochs": 3,
    "batch_size": 8,
    "lr": 1e-2,
    "scheduler": {"name": "CosineAnnealingLR", "eta_min": 1e-4},
}


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: dict, steps_per_epoch: int):
    kind = cfg["scheduler"]["name"]
    if kind == "CosineAnnealingLR":
        return torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=cfg["num_train_epochs"] * steps_per_epoch,
            eta_min=cfg["scheduler"]["eta_min"])
    raise ValueError(kind)


def main(cfg: dict) -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 10), torch.randint(0, 4, (64,)))
    loader = DataLoader(data, batch_size=cfg["batch_size"], shuffle=True)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
    scheduler = build_scheduler(optimizer, cfg, len(loader))
    lrs = []
    for epoch in range(cfg["num_train_epochs"]):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            lrs.append(optimizer.param_groups[0]["lr"])
        print(epoch, loss.item(), min(lrs), max(lrs))


main(CONFIG)
