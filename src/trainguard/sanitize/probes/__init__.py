"""The sanitizer's probes: one module per wrapped PyTorch API.

Each probe module defines ``attach(bus) -> list[Undo]``: it installs its wrappers or hooks (only
those some check listens to), owns the facts it records, and returns the actions that remove them
again. The watcher attaches every probe in :data:`PROBES` order and runs the undo actions in
reverse when it stops.
"""
