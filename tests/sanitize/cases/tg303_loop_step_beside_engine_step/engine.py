"""A training-engine wrapper whose backward() also steps the optimizer when the engine owns it."""


class Engine:
    def __init__(self, owns_step=False):
        self.owns_step = owns_step
        self.optimizer = None

    def wrap(self, optimizer):
        self.optimizer = optimizer
        return optimizer

    def backward(self, loss):
        loss.backward()
        if self.owns_step:  # the engine steps (and clears) inside backward
            self.optimizer.step()
            self.optimizer.zero_grad()
