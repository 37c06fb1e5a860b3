# A pedestrian trajectory forecaster, built by the scripts next to this file. Its Dropout makes
# every forward depend on the module's train/eval mode.
import torch.nn as nn


class Forecaster(nn.Module):
    def __init__(self, obs_len: int = 8, pred_len: int = 12, hidden: int = 32) -> None:
        super().__init__()
        self.pred_len = pred_len
        self.encode = nn.Sequential(nn.Linear(2 * obs_len, hidden), nn.ReLU(), nn.Dropout(0.25))
        self.decode = nn.Linear(hidden, 2 * pred_len)

    def forward(self, obs):
        out = self.decode(self.encode(obs.flatten(1)))
        return out.view(len(obs), self.pred_len, 2)
