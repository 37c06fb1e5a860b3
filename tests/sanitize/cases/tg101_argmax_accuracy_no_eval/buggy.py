# Modelled on sinhasam/vaal#2 "Related to computing test accuracy"
# (https://github.com/sinhasam/vaal/issues/2): the test function of an active-learning solver
# measured accuracy from the argmax of a VGG with BatchNorm and Dropout that was never switched to
# eval mode. No loss is computed in the test loop: only argmax and a count of correct labels.
import torch
from torch import nn


class TaskModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class Solver:
    def __init__(self, test_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.test_batches = test_batches
        self.ce_loss = nn.CrossEntropyLoss()

    def train(self, task_model: nn.Module, batches: list) -> float:
        optimizer = torch.optim.SGD(task_model.parameters(), lr=0.05, momentum=0.9)
        task_model.train()
        for imgs, labels in batches:
            preds = task_model(imgs)
            task_loss = self.ce_loss(preds, labels)
            optimizer.zero_grad()
            task_loss.backward()
            optimizer.step()
        return self.test(task_model)

    def test(self, task_model: nn.Module) -> float:
        total, correct = 0, 0  # expect: TG101
        for imgs, labels in self.test_batches:
            with torch.no_grad():
                preds = task_model(imgs)
            preds = torch.argmax(preds, dim=1)
            correct += int((preds == labels).sum())
            total += imgs.size(0)
        return correct / total * 100


def main() -> None:
    torch.manual_seed(0)
    batches = [(torch.randn(8, 1, 6, 6), torch.randint(0, 3, (8,))) for _ in range(4)]
    solver = Solver(batches[:2])
    print(f"test accuracy {solver.train(TaskModel(), batches):.1f}%")


if __name__ == "__main__":
    main()
