"""Pure layer: no I/O, no host import."""
