# Near misses for TG101, forwards of a model in training mode under no_grad whose output no
# backward reaches but which are not evaluations:
# - PPO-style value targets (nikhilbarhate99/PPO-PyTorch, https://github.com/nikhilbarhate99/PPO-PyTorch):
#   a helper called inside the update loop computes the critic's values under no_grad to form
#   advantages for the loss that is backpropagated right after;
# - BatchNorm recalibration (as torch.optim.swa_utils.update_bn does,
#   https://pytorch.org/docs/stable/optim.html#weight-averaging-swa-and-ema): forwards in training
#   mode under no_grad whose outputs are dropped, followed by model.eval() for the evaluation.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
critic = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Dropout(0.1), nn.Linear(16, 1))
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)


def advantages(states: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        values = critic(states).squeeze(-1)
    return returns - values


states, actions, returns = torch.randn(32, 4), torch.randint(0, 2, (32,)), torch.randn(32)
for update in range(3):
    adv = advantages(states, returns)
    logp = torch.log_softmax(actor(states), -1).gather(1, actions[:, None]).squeeze(1)
    loss = -(logp * adv).mean() + F.mse_loss(critic(states).squeeze(-1), returns)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def recalibrate(model: nn.Module, batches: list) -> None:
    model.train()
    with torch.no_grad():
        for x in batches:
            model(x)


recalibrate(net, [torch.randn(16, 4) for _ in range(3)])
net.eval()
with torch.no_grad():
    print(net(torch.randn(4, 4)).argmax(1).tolist())
