# Fixed twin of buggy.py (https://github.com/MILVLG/mcan-vqa/issues/26): net.train() at the top
# of every epoch, so each evaluation's eval() is undone.
import torch
import torch.nn.functional as F
from torch import nn


class FusionNet(nn.Module):
    def __init__(self, dim: int = 10, answers: int = 3) -> None:
        super().__init__()
        self.img = nn.Linear(dim, 16)
        self.ques = nn.Linear(dim, 16)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(16, answers)

    def forward(self, img: torch.Tensor, ques: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(torch.relu(self.img(img) * self.ques(ques))))


def evaluate(net: nn.Module, data: tuple) -> float:
    net.eval()
    with torch.no_grad():
        img, ques, ans = data
        return (net(img, ques).argmax(1) == ans).float().mean().item()


def train_engine(net: nn.Module, batches: list, val: tuple, epochs: int = 3) -> None:
    optim = torch.optim.Adam(net.parameters(), lr=1e-3)
    for epoch in range(epochs):
        net.train()
        for img, ques, ans in batches:
            optim.zero_grad()
            loss = F.cross_entropy(net(img, ques), ans)
            loss.backward()
            optim.step()
        print(epoch, evaluate(net, val))


if __name__ == "__main__":
    torch.manual_seed(0)
    batches = [(torch.randn(8, 10), torch.randn(8, 10), torch.randint(0, 3, (8,)))
               for _ in range(3)]
    train_engine(FusionNet(), batches, (torch.randn(16, 10), torch.randn(16, 10),
                                        torch.randint(0, 3, (16,))))
