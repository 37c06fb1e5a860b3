# Fixed twin of buggy.py (https://r2d.info/2019/01/15/pytorch/): the optimizer holds the backbone,
# the neck and the head. A loss network in training mode, left trainable and applied to both the
# prediction and the target (a perceptual-style loss, Johnson et al. 2016,
# https://arxiv.org/abs/1603.08155), is not trained on purpose and stays silent.
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 3)

    def forward(self, features):
        return self.fc(features)


torch.manual_seed(7)
backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
neck = nn.Sequential(nn.Linear(32, 16), nn.ReLU())
head = Head()
loss_network = nn.Sequential(nn.Linear(3, 8), nn.Tanh())
optimizer = torch.optim.Adam([*backbone.parameters(), *neck.parameters(), *head.parameters()],
                             lr=1e-2)
x, y = torch.randn(48, 10), torch.randint(0, 3, (48,))
target = nn.functional.one_hot(y, 3).float()
for step in range(60):
    optimizer.zero_grad()
    probs = head(features=neck(backbone(x))).softmax(1)
    loss = nn.functional.mse_loss(loss_network(probs), loss_network(target))
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
