# Modelled on ipolharvard/ethos-ares#20 (https://github.com/ipolharvard/ethos-ares/issues/20):
# inference ran under @torch.inference_mode() and nobody called model.eval(), so Dropout stayed on
# when the trained model was used. Here a keyword-spotting CNN is trained in one notebook cell and
# its transcribe() method labels clips in the next; the labels are written to a CSV file. Nothing
# compares them with a target: only the argmax is taken.
# %%
import csv
import io

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
WORDS = ["yes", "no", "up", "down"]


class KeywordCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(1, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(),
                                  nn.AdaptiveAvgPool1d(4))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(32, len(WORDS)))

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(wave))

    @torch.inference_mode()
    def transcribe(self, waves: torch.Tensor) -> list[str]:
        return [WORDS[i] for i in self(waves).argmax(-1).tolist()]


# %% training cell
model = KeywordCNN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
clips, labels = torch.randn(32, 1, 40), torch.randint(0, len(WORDS), (32,))
for epoch in range(3):
    for start in range(0, 32, 8):
        loss = F.cross_entropy(model(clips[start:start + 8]), labels[start:start + 8])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

# %% serving cell
model.eval()
out = io.StringIO()
writer = csv.writer(out)
for number, word in enumerate(model.transcribe(torch.randn(6, 1, 40))):
    writer.writerow([number, word])
print(out.getvalue())
