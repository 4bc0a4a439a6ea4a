"""The memory plan of a training or eval shape, counted by running the real code under fake tensors."""
