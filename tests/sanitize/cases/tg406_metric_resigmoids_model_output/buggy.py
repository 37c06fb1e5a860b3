# Modelled on GitHub yudi-mars/daisyRec#15 (https://github.com/yudi-mars/daisyRec/pull/15): a
# recommender's scorer returns sigmoid probabilities and BCEWithLogitsLoss applies the sigmoid
# again, so the loss does not converge. Here a trainer class also reports a hit rate from the same
# scores, through a method that applies the sigmoid once more: that metric treats the scores as
# logits too, so it does not make the probabilities needed, and the model's sigmoid is the line
# to change.
import torch
from torch import nn

torch.manual_seed(3)
USERS, ITEMS, DIM = 40, 60, 8


class ClickScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.users = nn.Embedding(USERS, DIM)
        self.items = nn.Embedding(ITEMS, DIM)

    def forward(self, user, item):
        affinity = (self.users(user) * self.items(item)).sum(dim=1)
        return torch.sigmoid(affinity)  # expect: TG406


class Trainer:
    def __init__(self, model):
        self.model = model
        self.criterion = nn.BCEWithLogitsLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=0.05)

    def _hit_rate(self, scores, clicks):
        return ((scores.sigmoid() > 0.5).float() == clicks).float().mean()

    def step(self, user, item, clicks):
        self.optimizer.zero_grad()
        scores = self.model(user, item)
        loss = self.criterion(scores, clicks)
        loss.backward()
        self.optimizer.step()
        return loss.item(), self._hit_rate(scores, clicks).item()


user = torch.randint(0, USERS, (256,))
item = torch.randint(0, ITEMS, (256,))
clicks = ((user + item) % 3 == 0).float()
trainer = Trainer(ClickScorer())
for epoch in range(5):
    loss, hits = trainer.step(user, item, clicks)
print(f"loss {loss:.3f} hit rate {hits:.3f}")
