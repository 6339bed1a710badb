"""loaderexp's search sweeper for Hydra (``hydra/sweeper=search``); the search itself is loaderexp.search."""
