# Modelled on GitHub MILVLG/mcan-vqa#26 (https://github.com/MILVLG/mcan-vqa/issues/26): the training
# engine calls net.train() once, before the epoch loop, and the per-epoch evaluation switches the
# same net to eval mode, so every epoch after the first trains with Dropout switched off. The line
# to change is the top of the epoch loop, where net.train() belongs.
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
    net.train()
    for epoch in range(epochs):  # expect: TG102
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
