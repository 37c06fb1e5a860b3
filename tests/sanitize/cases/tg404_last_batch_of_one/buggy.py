# Modelled on the forum thread "Batch norm training when batch size=1"
# (https://discuss.pytorch.org/t/batch-norm-training-when-batch-size-1/102979) and the many
# "Expected more than 1 value per channel when training" reports: 33 samples in batches of 8 leave
# a last batch of one, and BatchNorm1d cannot normalize a single value per channel.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(15)
data = TensorDataset(torch.randn(33, 6), torch.randint(0, 2, (33,)))
loader = DataLoader(data, batch_size=8, shuffle=True)  # expect: TG404
model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
