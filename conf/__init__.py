"""Hydra configs of loaderexp; a package only so an installed wheel can ship and find them."""
