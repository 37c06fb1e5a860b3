# Modelled on snakers4/silero-vad#699 (https://github.com/snakers4/silero-vad/pull/699): the
# fine-tuning code never called optimizer.zero_grad(), and the fix adds it before loss.backward().
# Here, a small voice-activity classifier: the epoch loop runs the forward and hands the loss to
# an update helper that runs the backward and the optimizer step; nothing zeroes the gradients,
# so every update applies the sum of all earlier batches' gradients. The helper owns the update:
# zero_grad belongs in it, before its backward.
import torch
from torch import nn

torch.manual_seed(4)


class FrameVAD(nn.Module):
    def __init__(self, n_feats=10, hidden=16):
        super().__init__()
        self.rnn = nn.GRU(n_feats, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, feats):
        out, _ = self.rnn(feats)
        return self.head(out).squeeze(-1)


def update(loss, optimizer):
    loss.backward()  # expect: TG301
    optimizer.step()


model = FrameVAD()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
criterion = nn.BCEWithLogitsLoss()
feats = torch.randn(24, 20, 10)
speech = (feats[..., 0] > 0.3).float()
for epoch in range(2):
    for i in range(0, 24, 8):
        logits = model(feats[i:i + 8])
        loss = criterion(logits, speech[i:i + 8])
        update(loss, optimizer)
    print(f"epoch {epoch} loss {loss.item():.4f}")
