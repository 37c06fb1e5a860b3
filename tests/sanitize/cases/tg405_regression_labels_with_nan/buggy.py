# Report: https://github.com/TencentAILabHealthcare/scPROTEIN/issues/3
# Modelled on TencentAILabHealthcare/scPROTEIN#3 ("some labels are NaN in the peptide x cell
# label matrix"): a regression on a label matrix whose missing entries are NaN. The model's
# prediction is finite; the target given to the MSE loss holds NaN, so the loss is NaN from the
# first step and the optimizer step writes NaN into the weights. The data is at fault, not the
# model or the loss, and the finding says so.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
features = torch.randn(64, 20)
labels = features[:, :5] @ torch.randn(5, 8)
labels[torch.rand(64, 8) < 0.1] = float("nan")  # peptides not measured in a cell

model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 8))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = DataLoader(TensorDataset(features, labels), batch_size=16, shuffle=True)
for epoch in range(2):
    for x, y in loader:
        pred = model(x)
        loss = criterion(pred, y)
        optimizer.zero_grad()
        loss.backward()  # expect: TG405
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
