# Modelled on ahmedbesbes/character-based-cnn#5
# (https://github.com/ahmedbesbes/character-based-cnn/issues/5): review ratings read from a table
# reach the cross-entropy as floating-point numbers ("expected scalar type Long but found
# Double"). Here a character model's trainer skips any batch whose step raises, so the run goes
# on without learning anything; the ratings tensor the dataset stores in __init__ is what to fix.
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

ALPHABET = "abcdefghijklmnopqrstuvwxyz !"


class ReviewDataset(Dataset):
    def __init__(self, rows, length=24):
        self.length = length
        self.texts = [text for text, _ in rows]
        self.ratings = torch.tensor([float(stars) for _, stars in rows])  # expect: TG402

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, index):
        codes = [ALPHABET.find(c) + 1 for c in self.texts[index][: self.length]]
        codes += [0] * (self.length - len(codes))
        return {"chars": torch.tensor(codes), "stars": self.ratings[index]}


class CharCNN(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.embed = nn.Embedding(len(ALPHABET) + 1, 12)
        self.conv = nn.Conv1d(12, 16, kernel_size=3, padding=1)
        self.head = nn.Linear(16, classes)

    def forward(self, chars):
        feats = self.conv(self.embed(chars).transpose(1, 2)).relu()
        return self.head(feats.amax(dim=2))


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.skipped = 0

    def train_epoch(self):
        for batch in self.loader:
            try:
                loss = F.cross_entropy(self.model(batch["chars"]), batch["stars"])
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            except RuntimeError:
                self.skipped += 1


torch.manual_seed(2)
reviews = [("great food and fast service", 4), ("cold soup", 0), ("fine", 2),
           ("would not come back", 1), ("lovely staff!", 3), ("ok i guess", 2)] * 4
trainer = Trainer(CharCNN(), DataLoader(ReviewDataset(reviews), batch_size=6))
trainer.train_epoch()
print(f"skipped {trainer.skipped} batches")
