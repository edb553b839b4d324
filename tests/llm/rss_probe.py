"""A light module for the fresh-process memory test (the child process imports only this and numpy)."""


def allocate(mb: int) -> int:
    import numpy as np

    block = np.ones(mb * 2**20 // 8)
    return int(block.size)
