"""The broker side of a node: control requests in, replica transitions and ISR writes out; log dirs and dynamic configs as a broker sees them."""
