"""Kernel sources: git plumbing, trees, kbisect's own repository and worktrees, the demo
history, and -rc tags."""
