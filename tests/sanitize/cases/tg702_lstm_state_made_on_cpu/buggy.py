# Report: https://github.com/Lightning-AI/pytorch-lightning/issues/3738
# Modelled on GitHub Lightning-AI/pytorch-lightning#3738 ("RuntimeError: Input and hidden tensors
# are not at the same device"): a character-level LSTM generator builds its initial hidden and cell
# state with torch.zeros(...) and no device inside forward, so they stay on the CPU while the model
# and the batch live on the accelerator. The "meta" device stands in for "cuda" so that the case
# runs on any machine; PyTorch's RNN raises its own wording of the device error.
import torch
from torch import nn


class CharGenerator(nn.Module):
    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(vocab, 16)
        self.lstm = nn.LSTM(16, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, letters: torch.Tensor) -> torch.Tensor:
        state = (torch.zeros(2, letters.shape[0], self.hidden),  # expect: TG702
                 torch.zeros(2, letters.shape[0], self.hidden))
        seq, _ = self.lstm(self.embed(letters), state)
        return self.out(seq)


class Trainer:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.model = CharGenerator(vocab=30, hidden=24).to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.criterion = nn.CrossEntropyLoss()

    def fit(self, batches: list[torch.Tensor]) -> None:
        for text in batches:
            text = text.to(self.device)
            self.optimizer.zero_grad()
            logits = self.model(text[:, :-1])
            loss = self.criterion(logits.reshape(-1, 30), text[:, 1:].reshape(-1))
            loss.backward()
            self.optimizer.step()


torch.manual_seed(3)
Trainer(torch.device("meta")).fit([torch.randint(0, 30, (4, 12)) for _ in range(3)])
