# Modelled on rasbt/LLMs-from-scratch#1022 (https://github.com/rasbt/LLMs-from-scratch/pull/1022):
# "the codebase downloads PyTorch model files from external URLs using requests.get() and
# subsequently loads them with torch.load()", so a tampered file runs its pickled code. The file is
# written during the run, but from downloaded bytes, not by the program's own torch.save (which
# only writes the fine-tuned checkpoints). A file:// URL stands in for the model host. Fixed twin:
# weights_only=True.
import tempfile
import urllib.request
from pathlib import Path

import torch
from torch import nn

WEIGHTS_URL = (Path(__file__).resolve().parent / "mirror_weights.pt").as_uri()


def download(url):
    with urllib.request.urlopen(url) as response:
        return response.read()


class Finetuner:
    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.model = nn.Linear(3, 2)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def load_pretrained(self):
        path = self.workdir / "pretrained.pth"
        if not path.exists():
            open(path, "wb").write(download(WEIGHTS_URL))
        state = torch.load(path, weights_only=False)  # expect: TG701
        self.model.load_state_dict(state["model"])

    def fit(self, steps):
        for step in range(steps):
            loss = self.model(torch.randn(4, 3)).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "step": steps}
        torch.save(state, self.workdir / "finetuned.pth")


if __name__ == "__main__":
    tuner = Finetuner(tempfile.mkdtemp())
    tuner.load_pretrained()
    tuner.fit(3)
