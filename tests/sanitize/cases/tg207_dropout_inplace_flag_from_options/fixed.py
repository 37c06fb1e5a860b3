# Report: https://github.com/OpenNMT/OpenNMT-py/pull/764
# Modelled on OpenNMT/OpenNMT-py#764 (ReLU followed by an in-place dropout breaks backward): a
# position-wise feed-forward block reads its dropout's in-place flag from the options, and the
# options turn it on. The dropout overwrites the ReLU output that ReLU's backward saved, so the
# first backward raises "modified by an inplace operation ... output 0 of Relu". The line to
# change is the dropout built with that flag (or the option that sets it).
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
OPTIONS = {"d_model": 16, "d_ff": 32, "dropout": 0.1, "inplace_dropout": False}


class FeedForward(nn.Module):
    def __init__(self, opt: dict) -> None:
        super().__init__()
        self.w_1 = nn.Linear(opt["d_model"], opt["d_ff"])
        self.relu = nn.ReLU()
        self.drop = nn.Dropout(opt["dropout"], inplace=opt["inplace_dropout"])
        self.w_2 = nn.Linear(opt["d_ff"], opt["d_model"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.w_2(self.drop(self.relu(self.w_1(x))))


model = FeedForward(OPTIONS)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model.train()
for step in range(3):
    x = torch.randn(4, 5, OPTIONS["d_model"])
    loss = F.mse_loss(model(x), x.flip(1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
