# Modelled on GitHub chr5tphr/zennit#185 (https://github.com/chr5tphr/zennit/pull/185): a layer's
# weight was overwritten with a new torch.nn.Parameter built from other tensors, so gradients no
# longer reached the tensors it was computed from (the fix sets the attribute to the computed
# tensor itself). Here, a small hypernetwork makes a target layer's weight from a task code and the
# forward stores it as a fresh Parameter: a new leaf, so the hypernetwork never learns.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(3)


class TaskConditioned(nn.Module):
    def __init__(self, n_in: int = 6, n_out: int = 3, code: int = 4) -> None:
        super().__init__()
        self.shape = (n_out, n_in)
        self.hyper = nn.Sequential(nn.Linear(code, 32), nn.Tanh(), nn.Linear(32, n_out * n_in))
        self.target = nn.Linear(n_in, n_out)

    def forward(self, x, task):
        flat = self.hyper(task).mean(0)
        self.target.weight = nn.Parameter(flat.view(self.shape))  # expect: TG205
        return self.target(x)


def main() -> None:
    model = TaskConditioned()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(6):
        x, task = torch.randn(16, 6), torch.randn(16, 4)
        y = torch.randint(0, 3, (16,))
        loss = F.cross_entropy(model(x, task), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
