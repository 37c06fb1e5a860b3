# Modelled on Coderx7/SimpleNet#2 (https://github.com/Coderx7/SimpleNet/issues/2): a CIFAR
# classifier whose forward applies `F.dropout2d(out, 0.1, training=True)` after global pooling, so
# the "evaluation" after model.eval() still drops feature maps and test accuracy changes from run
# to run (the author fixed it to follow the mode). The feature extractor's nn.Dropout2d modules do
# follow the mode; only the functional call ignores it.
# Fixed twin: training=self.training.
import torch
import torch.nn.functional as F
from torch import nn


class SmallSimpleNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Dropout2d(0.1),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.classifier = nn.Linear(32, classes)

    def forward(self, x):
        out = self.features(x)
        out = F.max_pool2d(out, kernel_size=out.size()[2:])
        out = F.dropout2d(out, 0.1, training=True)  # expect: TG105
        return self.classifier(out.flatten(1))


class Trainer:
    def __init__(self):
        self.model = SmallSimpleNet()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(64, 3, 8, 8, generator=g)
        self.labels = torch.randint(0, 10, (64,), generator=g)

    def train_epoch(self):
        self.model.train()
        for i in range(0, 64, 16):
            loss = F.cross_entropy(self.model(self.images[i:i + 16]), self.labels[i:i + 16])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def test(self):
        self.model.eval()
        correct = 0
        for i in range(0, 64, 32):
            correct += (self.model(self.images[i:i + 32]).argmax(1) == self.labels[i:i + 32]).sum()
        return correct.item() / 64


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer()
    for epoch in range(2):
        trainer.train_epoch()
        print(epoch, trainer.test())
