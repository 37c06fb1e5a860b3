# The shared iteration() of the BERT-pytorch trainer by codertimo runs both phases and calls
# the model's forward by name (`self.model.forward(x)`); the test phase passes train=False with
# grad enabled, so every test batch records a graph nothing uses. The PyTorch docs: "Disabling
# gradient calculation is useful for inference, when you are sure that you will not call
# Tensor.backward()" (https://pytorch.org/docs/stable/generated/torch.no_grad.html). Reported
# at the test phase's call into the shared step, where no_grad goes.
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, train_batches, test_batches):
        self.model = model
        self.train_batches, self.test_batches = train_batches, test_batches
        self.optim = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train(self, epoch):
        self.model.train()
        return self.iteration(epoch, self.train_batches)

    def test(self, epoch):
        self.model.eval()
        return self.iteration(epoch, self.test_batches, train=False)  # expect: TG103

    def iteration(self, epoch, batches, train=True):
        total = 0.0
        for x, y in batches:
            loss = nn.functional.cross_entropy(self.model.forward(x), y)
            if train:
                self.optim.zero_grad()
                loss.backward()
                self.optim.step()
            total += loss.item()
        return total / len(batches)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(20, 32)
        self.drop = nn.Dropout(0.1)
        self.out = nn.Linear(32, 3)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.hidden(x))))


model = Classifier()
batches = [(torch.randn(16, 20), torch.randint(0, 3, (16,))) for _ in range(4)]
trainer = Trainer(model, batches, batches[:2])
for epoch in range(2):
    print(trainer.train(epoch), trainer.test(epoch))
