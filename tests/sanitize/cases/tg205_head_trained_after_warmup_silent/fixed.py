# Near miss for TG205 and TG101: staged multi-task training with an auxiliary head (auxiliary-task
# schedules, e.g. "Adaptive Auxiliary Task Weighting", https://arxiv.org/abs/1910.12271). During a
# warm-up the auxiliary loss is only logged, so the auxiliary head gets no gradient in the first
# steps; joint training then trains it (no cut path: its parameters do get gradients during the
# run); at the end the main task is fine-tuned alone and the auxiliary loss is logged again. The
# warm-up and fine-tuning calls come from their own lines and no backward reaches their auxiliary
# output, but each is part of a training step (the main loss's backward follows): training, not
# an evaluation.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(31)
x_all = torch.randn(256, 10)
ya_all = x_all[:, :3].argmax(1)
yb_all = x_all[:, 3] - x_all[:, 4]
data = list(zip(x_all.split(32), ya_all.split(32), yb_all.split(32)))
backbone = nn.Sequential(nn.Linear(10, 48), nn.ReLU())
head_a = nn.Linear(48, 3)
head_b = nn.Sequential(nn.Dropout(0.2), nn.Linear(48, 1))
optimizer = torch.optim.Adam([*backbone.parameters(), *head_a.parameters(),
                              *head_b.parameters()], lr=3e-3)


def train_step(x, ya, yb, aux_weight):
    features = backbone(x)
    loss_a = F.cross_entropy(head_a(features), ya)
    loss_b = F.mse_loss(head_b(features), yb.unsqueeze(1))
    loss = loss_a + aux_weight * loss_b if aux_weight > 0 else loss_a
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss_a.item(), loss_b.item()


for epoch in range(2):
    logs = [train_step(x, ya, yb, 0.0) for x, ya, yb in data]  # warm-up: auxiliary loss logged
    print("warm-up", epoch, round(sum(b for _, b in logs) / len(logs), 3))
for epoch in range(2):
    logs = [train_step(x, ya, yb, 0.5) for x, ya, yb in data]  # joint training
    print("joint", epoch, round(sum(b for _, b in logs) / len(logs), 3))
logs = [train_step(x, ya, yb, 0.0) for x, ya, yb in data]  # main task alone: auxiliary loss logged
print("main only", round(sum(b for _, b in logs) / len(logs), 3))
