# Near-misses, must stay silent: forwards in train mode whose outputs are not an evaluation.
# Modelled on Haochen-Wang409/U2PL#64 "model_teacher.train() in train_semi.py"
# (https://github.com/Haochen-Wang409/U2PL/issues/64): the teacher is kept in train mode on
# purpose and its argmax under no_grad gives pseudo-labels for an unsupervised loss (its pseudo-label
# agreement is logged too); an RL rollout whose policy (with Dropout) picks actions by argmax
# under no_grad; and Monte Carlo dropout with the model in eval mode and only Dropout switched on.
import torch
import torch.nn.functional as F
from torch import nn


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(24, 3))


def semi_supervised(student: nn.Module, teacher: nn.Module, batches: list) -> float:
    optimizer = torch.optim.SGD(student.parameters(), lr=0.05)
    student.train()
    teacher.train()  # on purpose: its BatchNorm statistics follow the unlabeled data
    agree = 0.0
    for x, y in batches:
        with torch.no_grad():
            pred_teacher = teacher(x)
            _, pseudo = torch.max(F.softmax(pred_teacher, dim=1), dim=1)
        agree += (pseudo == y).float().mean().item()
        loss = F.cross_entropy(student(x), pseudo)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for t, s in zip(teacher.parameters(), student.parameters()):
                t.mul_(0.99).add_(s, alpha=0.01)
    return agree / len(batches)


class Env:
    def __init__(self) -> None:
        self.t = 0

    def reset(self) -> torch.Tensor:
        self.t = 0
        return torch.randn(2, 6)

    def step(self, action: int) -> tuple[torch.Tensor, float, bool]:
        self.t += 1
        return torch.randn(2, 6), float(action == 1), self.t >= 5


def rollout(policy: nn.Module, env: Env) -> float:
    policy.train()
    obs, total, done = env.reset(), 0.0, False
    while not done:
        with torch.no_grad():
            action = policy(obs).argmax(dim=1)[0].item()
        if action == 2:
            total -= 0.1
        obs, reward, done = env.step(action)
        total += reward
    return total


def mc_dropout(model: nn.Module, x: torch.Tensor, y: torch.Tensor, samples: int = 4) -> float:
    model.eval()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.train()
    with torch.no_grad():
        probs = torch.stack([F.softmax(model(x), dim=1) for _ in range(samples)]).mean(0)
    model.eval()
    return (probs.argmax(1) == y).float().mean().item()


def main() -> None:
    torch.manual_seed(4)
    batches = [(torch.randn(12, 6), torch.randint(0, 3, (12,))) for _ in range(3)]
    print(semi_supervised(mlp(), mlp(), batches))
    print(rollout(mlp(), Env()))
    print(mc_dropout(mlp(), *batches[0]))


if __name__ == "__main__":
    main()
