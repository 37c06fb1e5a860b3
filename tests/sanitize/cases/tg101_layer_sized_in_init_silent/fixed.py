# Report: https://github.com/nshaud/DeepHyperX/issues/51
# Near-miss, must stay silent. Modelled on nshaud/DeepHyperX#51's 3-D CNNs (Hamida et al.), which
# size their classifier by pushing a zero patch through the convolutional part inside __init__
# under torch.no_grad(): the BatchNorm layers run in training mode there, called one by one by a
# helper method rather than through the model, but that is the model being built, not an
# evaluation. Validation afterwards calls net.eval().
import torch
from torch import nn
from torch.nn import functional as F


class SpectralCNN(nn.Module):
    def __init__(self, bands: int = 12, classes: int = 4, patch: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv3d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm3d(4)
        self.conv2 = nn.Conv3d(4, 8, (3, 3, 3), padding=(1, 0, 0))
        self.bn2 = nn.BatchNorm3d(8)
        self.dropout = nn.Dropout(0.3)
        with torch.no_grad():
            features = self._features(torch.zeros(1, 1, bands, patch, patch)).shape[1]
        self.fc = nn.Linear(features, classes)

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(x))).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.dropout(self._features(x)))


def validate(net: nn.Module, batches: list) -> float:
    net.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in batches:
            correct += (net(x).argmax(1) == y).sum().item()
            total += len(y)
    return correct / total


torch.manual_seed(0)
net = SpectralCNN()
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
data = [(torch.randn(8, 1, 12, 5, 5), torch.randint(0, 4, (8,))) for _ in range(4)]
for epoch in range(2):
    net.train()
    for x, y in data:
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: accuracy {validate(net, data):.2f}")
