# Report: https://github.com/rll-research/cic/issues/5
# An image-based RL agent: observations are augmented and encoded under
# torch.no_grad() in update(), then fed to the critic's loss; encoder_opt steps after the
# critic's backward, but the encoder's features carry no graph, so it never learns (the
# shape of rll-research/cic#5, where the encoder's weights stayed at their initial values).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Agent:
    def __init__(self, obs_dim=16, feat_dim=8, lr=1e-3):
        self.encoder = nn.Sequential(nn.Linear(obs_dim, feat_dim), nn.ReLU())
        self.critic = nn.Linear(feat_dim + 1, 1)
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)

    def encode(self, obs):
        return self.encoder(obs + 0.01 * torch.randn_like(obs))

    def update_critic(self, feats, action, target_q):
        q = self.critic(torch.cat([feats, action], dim=1))
        loss = F.mse_loss(q, target_q)
        self.encoder_opt.zero_grad()
        self.critic_opt.zero_grad()
        loss.backward()
        self.critic_opt.step()
        self.encoder_opt.step()
        return loss.item()

    def update(self, obs, action, reward):
        with torch.no_grad():
            feats = self.encode(obs)  # expect: TG205
        return self.update_critic(feats, action, reward)


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = Agent()
    for _ in range(20):
        agent.update(torch.randn(32, 16), torch.randn(32, 1), torch.randn(32, 1))
