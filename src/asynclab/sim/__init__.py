"""The simulated GPU: torch.cuda's stand-ins, GPU tensors under PyTorch's dispatcher, and its run as a profiler trace."""
