# Modelled on lopuhin/kaggle-imet-2019#3 "Sigmoid before BCEWithLogitsLoss"
# (https://github.com/lopuhin/kaggle-imet-2019/issues/3): a click-through model keeps an
# nn.Sigmoid module as an attribute and its loss method applies it to the logits before
# BCEWithLogitsLoss, which applies the sigmoid again, so predictions stay in (0.5, 0.73). The line
# to change is the call of the module, not the line that built it (the same module is also used,
# correctly, to turn logits into click probabilities for serving).
# Fixed twin: the loss method passes the raw logits.
import torch
from torch import nn


class ClickModel(nn.Module):
    def __init__(self, features=12):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 24), nn.ReLU(), nn.Linear(24, 1))
        self.to_prob = nn.Sigmoid()
        self.criterion = nn.BCEWithLogitsLoss()

    def forward(self, x):
        return self.body(x).squeeze(1)

    def loss(self, x, clicked):
        scores = self.to_prob(self(x))  # expect: TG406
        return self.criterion(scores, clicked)

    @torch.no_grad()
    def click_probability(self, x):
        return self.to_prob(self(x))


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(128, 12)
    clicked = (x[:, 0] > 0).float()
    model = ClickModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(5):
        loss = model.loss(x, clicked)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(loss.item(), model.click_probability(x[:4]))
