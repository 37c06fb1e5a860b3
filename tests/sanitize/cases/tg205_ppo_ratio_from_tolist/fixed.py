# Modelled on GitHub Kostis-S-Z/exploring_meta#16
# (https://github.com/Kostis-S-Z/exploring_meta/issues/16): a PPO loss raised "element 0 of
# tensors does not require grad", and the loss was then set to requires_grad=True by hand, which
# silences the error while no gradient reaches the policy. Here, functions for a clipped surrogate
# on a contextual bandit: the new log-probabilities are taken out as a Python list.
import torch
from torch import nn

torch.manual_seed(6)
N_OBS, N_ACTIONS, CLIP = 5, 4, 0.2


def make_policy():
    return nn.Sequential(nn.Linear(N_OBS, 32), nn.ReLU(), nn.Linear(32, N_ACTIONS))


def collect(policy, n=64):
    obs = torch.randn(n, N_OBS)
    with torch.no_grad():
        dist = torch.distributions.Categorical(logits=policy(obs))
        actions = dist.sample()
        old_logp = dist.log_prob(actions)
    rewards = (actions == obs[:, :N_ACTIONS].argmax(1)).float()
    return obs, actions, old_logp, rewards - rewards.mean()


def surrogate(policy, obs, actions, old_logp, advantages):
    dist = torch.distributions.Categorical(logits=policy(obs))
    new_logp = dist.log_prob(actions)
    ratio = torch.exp(new_logp - old_logp)
    clipped = torch.clamp(ratio, 1 - CLIP, 1 + CLIP)
    loss = -torch.min(ratio * advantages, clipped * advantages).mean()
    return loss.requires_grad_(True)


def train(iterations=6, epochs=3):
    policy = make_policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    for it in range(iterations):
        batch = collect(policy)
        for _ in range(epochs):
            loss = surrogate(policy, *batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return policy


train()
print("done")
