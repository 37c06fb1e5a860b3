# Modelled on GitHub ahmedbesbes/character-based-cnn#5
# (https://github.com/ahmedbesbes/character-based-cnn/issues/5): a character-level CNN trained on
# review ratings 0..10 fails with "expected scalar type Long but found Double": the dataset gives
# each rating as a Python float, which the DataLoader collates into a float64 tensor. Here, a
# class-based trainer over a random split of the dataset.
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, random_split

torch.manual_seed(0)
ALPHABET, LENGTH, CLASSES = 30, 40, 11


class ReviewDataset(Dataset):
    def __init__(self, n=64):
        g = torch.Generator().manual_seed(0)
        self.texts = torch.randint(0, ALPHABET, (n, LENGTH), generator=g)
        self.ratings = (self.texts[:, :5].sum(1) % CLASSES).tolist()

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, idx):
        encoded = F.one_hot(self.texts[idx], ALPHABET).float().T
        rating = float(self.ratings[idx])  # expect: TG402
        return encoded, rating


class CharCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(ALPHABET, 32, 5), nn.ReLU(), nn.AdaptiveMaxPool1d(1))
        self.fc = nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.fc(self.conv(x).squeeze(-1))


class Trainer:
    def __init__(self, dataset):
        train_set, _ = random_split(dataset, [48, 16], generator=torch.Generator().manual_seed(1))
        self.train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
        self.model = CharCNN()
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def train_epoch(self):
        self.model.train()
        for step, (texts, labels) in enumerate(self.train_loader):
            loss = self.criterion(self.model(texts), labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


trainer = Trainer(ReviewDataset())
for epoch in range(2):
    print(f"epoch {epoch}: {trainer.train_epoch():.3f}")
