"""loaderexp's grid sweeper for Hydra (``hydra/sweeper=grid``, the default): Hydra's basic sweeper, each job composed once."""
