"""The `git bisect run` method: the run in a scratch worktree, one step, its judge, ktest.pl."""
