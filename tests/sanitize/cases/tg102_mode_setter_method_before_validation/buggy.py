# Modelled on fartashf/vsepp#4 (https://github.com/fartashf/vsepp/issues/4): the model wrapper
# has train_start()/val_start() methods that only switch its encoders' modes; validation runs
# every few iterations through val_start(), but train_start() is only called at the top of each
# epoch, so the iterations after a validation train the encoders in eval mode. val_start() does
# what it is for: the validation call in the loop is where train_start() belongs.
import torch
from torch import nn
import torch.nn.functional as F


class Encoders:
    def __init__(self) -> None:
        self.img_enc = nn.Sequential(nn.Linear(10, 16), nn.Dropout(0.3), nn.Linear(16, 8))
        self.txt_enc = nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.3), nn.Linear(16, 8))
        params = list(self.img_enc.parameters()) + list(self.txt_enc.parameters())
        self.optimizer = torch.optim.Adam(params, lr=1e-3)

    def train_start(self) -> None:
        self.img_enc.train()
        self.txt_enc.train()

    def val_start(self) -> None:
        self.img_enc.eval()
        self.txt_enc.eval()

    def train_emb(self, images: torch.Tensor, captions: torch.Tensor) -> float:
        im, tx = F.normalize(self.img_enc(images), dim=1), F.normalize(self.txt_enc(captions), dim=1)
        scores = im @ tx.t()
        loss = F.cross_entropy(scores / 0.1, torch.arange(len(scores)))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def validate(model: Encoders, images: torch.Tensor, captions: torch.Tensor) -> float:
    model.val_start()
    with torch.no_grad():
        sims = model.img_enc(images) @ model.txt_enc(captions).t()
    return (sims.argmax(1) == torch.arange(len(sims))).float().mean().item()


torch.manual_seed(0)
model = Encoders()
images, captions = torch.randn(32, 10), torch.randn(32, 6)
iteration = 0
for epoch in range(2):
    model.train_start()
    for i in range(0, 32, 8):
        model.train_emb(images[i:i + 8], captions[i:i + 8])
        iteration += 1
        if iteration % 2 == 0:
            r1 = validate(model, images, captions)  # expect: TG102
