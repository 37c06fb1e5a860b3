# Near miss for TG101: online triplet mining skips the batches whose hinge loss is already zero
# (nothing to learn), so those forwards get no backward; they are still training
# (TripletMarginLoss, https://pytorch.org/docs/stable/generated/torch.nn.TripletMarginLoss.html).
# Hard-example mining scores a batch under no_grad inside the training loop, then trains on the
# hardest half (OHEM, https://arxiv.org/abs/1604.03540).
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
embed = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 4))
criterion = nn.TripletMarginLoss(margin=0.2)
opt = torch.optim.SGD(embed.parameters(), lr=0.05)
skipped = 0
for step in range(12):
    anchor = torch.randn(16, 8)
    positive = anchor + 0.01 * torch.randn(16, 8)
    negative = anchor + (5.0 if step % 2 else 0.01) * torch.randn(16, 8)
    loss = criterion(embed(anchor), embed(positive), embed(negative))
    if loss.item() == 0.0:
        skipped += 1
        continue
    opt.zero_grad()
    loss.backward()
    opt.step()

classifier = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
opt = torch.optim.SGD(classifier.parameters(), lr=0.05)
for step in range(6):
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    with torch.no_grad():
        per_sample = F.cross_entropy(classifier(x), y, reduction="none")
    hard = per_sample.argsort(descending=True)[:16]
    opt.zero_grad()
    F.cross_entropy(classifier(x[hard]), y[hard]).backward()
    opt.step()
print(skipped >= 0)
