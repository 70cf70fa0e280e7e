"""What the process's runtime needs from us: pausing CPython's cyclic garbage collector around latency-critical work."""
