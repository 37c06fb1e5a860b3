# Report: https://github.com/huggingface/transformers/issues/1218
# Modelled on huggingface/transformers#1218 (how to give the layers after BERT their own weight
# decay groups): a tagger built from an encoder, a BiLSTM, a CRF-style transition matrix and a
# classifier gets its optimizer from a helper that returns the keyword options, groups included
# (`AdamW(**build_optimizer_options(model, cfg))`). The transition matrix was added to the model
# later and no group lists it, so it receives gradients and never changes.
import torch
from torch import nn

CFG = {"lr": 3e-3, "weight_decay": 0.01, "lstm_lr": 1e-2}


class Tagger(nn.Module):
    def __init__(self, vocab: int = 50, tags: int = 5) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, 16)
        self.bilstm = nn.LSTM(16, 8, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(16, tags)
        self.transitions = nn.Parameter(torch.zeros(tags, tags))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.bilstm(self.encoder(tokens))
        emissions = self.classifier(h)
        # a pairwise score of consecutive tags, as a CRF adds to the emissions
        return emissions[:, 1:] + emissions[:, :-1].softmax(-1) @ self.transitions


def build_optimizer_options(model: Tagger, cfg: dict) -> dict:
    groups = [
        {"params": [p for n, p in model.encoder.named_parameters()],
         "weight_decay": cfg["weight_decay"]},
        {"params": [p for n, p in model.bilstm.named_parameters()], "lr": cfg["lstm_lr"]},
        {"params": [p for n, p in model.classifier.named_parameters()],  # expect: TG304
         "weight_decay": cfg["weight_decay"]},
    ]
    return dict(params=groups, lr=cfg["lr"])


torch.manual_seed(4)
model = Tagger()
optimizer = torch.optim.AdamW(**build_optimizer_options(model, CFG))
for step in range(4):
    tokens = torch.randint(0, 50, (6, 9))
    tags = torch.randint(0, 5, (6, 8))
    loss = nn.functional.cross_entropy(model(tokens).reshape(-1, 5), tags.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
