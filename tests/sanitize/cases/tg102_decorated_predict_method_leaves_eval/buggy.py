# Modelled on havakv/torchtuples#9 (https://github.com/havakv/torchtuples/pull/9): a
# prediction method switched the network to eval mode and did not switch it back, so training
# that went on after a prediction ran in eval mode. Here a churn classifier's decorated
# predict_proba() calls self.eval(); the fit loop calls it every few steps and calls train()
# once, before its epochs. The method's return is where train() must come back.
import torch
from torch import nn
import torch.nn.functional as F


class ChurnNet(nn.Module):
    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_features, 24), nn.BatchNorm1d(24), nn.ReLU(),
                                  nn.Dropout(0.3), nn.Linear(24, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).squeeze(-1)

    @torch.no_grad()
    def predict_proba(self, x: torch.Tensor) -> torch.Tensor:
        self.eval()
        probs = torch.sigmoid(self(x))
        return probs  # expect: TG102


def fit(model, x, y, x_val, y_val, epochs=4, batch=16):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = 0
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(x))
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            loss = F.binary_cross_entropy_with_logits(model(x[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 3 == 0:  # a quick held-out check every few steps
                hit = (model.predict_proba(x_val) > 0.5).float() == y_val
                print(f"step {step} loss {loss.item():.4f} val acc {hit.float().mean():.3f}")


torch.manual_seed(0)
features = torch.randn(80, 7)
churned = (features[:, 0] - features[:, 3] > 0).float()
fit(ChurnNet(7), features[:64], churned[:64], features[64:], churned[64:])
