# Modelled on fastai/fastai#224 (https://github.com/fastai/fastai/pull/224): a learner's prediction
# method did not switch the model to eval mode, so the same picture got different probabilities on
# each call. Here Learner.fit() sets training mode itself; get_preds() runs the model under
# no_grad and returns class probabilities that the script only prints: no metric, no loss. The
# finding belongs in get_preds(), where model.eval() is missing, not at the script's call.
import torch
from torch import nn
import torch.nn.functional as F


class Learner:
    def __init__(self, model: nn.Module, batches: list) -> None:
        self.model, self.batches = model, batches
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def fit(self, epochs: int) -> None:
        self.model.train()
        for _ in range(epochs):
            for x, y in self.batches:
                loss = F.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

    def get_preds(self, inputs: list) -> torch.Tensor:
        out = []  # expect: TG101
        with torch.no_grad():
            for x in inputs:
                out.append(torch.softmax(self.model(x), -1))
        return torch.cat(out)


torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                    nn.Flatten(), nn.Dropout(0.4), nn.Linear(6, 3))
learn = Learner(net, [(torch.randn(8, 3, 12, 12), torch.randint(0, 3, (8,))) for _ in range(3)])
learn.fit(2)
probs = learn.get_preds([torch.randn(4, 3, 12, 12) for _ in range(2)])
print(probs.max(-1).values)
