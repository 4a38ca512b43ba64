"""mjx-pbac: PBAC and its baselines trained on the accelerator.

The environments live in the top-level `envs` package (they do not depend on this one). The
trainer (networks, losses, replay, the jitted loop) arrives with issue 3.
"""

__version__ = "0.1.0"
