# Modelled on EleutherAI/sparsify#22 (https://github.com/EleutherAI/sparsify/pull/22), "Support
# resuming training after interruption: optimizer and LR scheduler state are now saved to disk,
# along with the global step". A sparse-autoencoder trainer writes its checkpoint as two files,
# the weights (sae.pt) and the training state (state.pt, the step and tokens seen), and resumes
# from them; Adam's moments are in neither file, so the resumed run restarts them from zero.
import os
import tempfile

import torch
from torch import nn


class SparseAutoencoder(nn.Module):
    def __init__(self, d_in=16, d_sae=64):
        super().__init__()
        self.encoder = nn.Linear(d_in, d_sae)
        self.decoder = nn.Linear(d_sae, d_in)

    def forward(self, x):
        latents = torch.relu(self.encoder(x))
        return self.decoder(latents), latents


class Trainer:
    def __init__(self, sae, out_dir):
        self.sae = sae
        self.out_dir = out_dir
        self.opt = torch.optim.Adam(sae.parameters(), lr=1e-3)
        self.global_step = 0

    def fit(self, acts, steps):
        for _ in range(steps):
            recon, latents = self.sae(acts)
            loss = (recon - acts).pow(2).mean() + 1e-3 * latents.abs().mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.global_step += 1

    def save(self):
        torch.save(self.sae.state_dict(), os.path.join(self.out_dir, "sae.pt"))
        torch.save({"global_step": self.global_step,
                    "num_tokens_seen": self.global_step * 32},  # expect: TG504
                   os.path.join(self.out_dir, "state.pt"))

    def load(self):
        self.sae.load_state_dict(torch.load(os.path.join(self.out_dir, "sae.pt")))
        state = torch.load(os.path.join(self.out_dir, "state.pt"))
        self.global_step = state["global_step"]


torch.manual_seed(0)
acts = torch.randn(32, 16)
out_dir = tempfile.mkdtemp()
first = Trainer(SparseAutoencoder(), out_dir)
first.fit(acts, 5)
first.save()
resumed = Trainer(SparseAutoencoder(), out_dir)
resumed.load()
resumed.fit(acts, 5)
