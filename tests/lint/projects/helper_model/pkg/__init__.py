from .nets import Net

__all__ = ["Net"]
