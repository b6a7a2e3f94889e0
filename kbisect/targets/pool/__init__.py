"""A pool of targets: N machines one kbisect process drives as one Target.

`--target pool.toml` names a file with `kind = "pool"` (config.py has its format): each
member is a target as `--target` names it (a configured ssh machine, an emulated one
written by `kbisect emu up --name NAME`, a vng slot, the fake target), or one written
inline. The contract the rest of kbisect builds on:

- `target.Pool(Target)`: the pool as one target; used plainly (one boot after another)
  it boots on its first machine that is not quarantined (`Pool.seat`). A bad pool file is
  one line, exit 2, before any build (`config.BadPool`, a UserError): an unknown key or
  member kind, a member listed twice (by name, or an ssh host:port), a pool in a pool,
  no members, members of different arches; each member's own checks apply (an ssh
  member's host must be a name or a loopback address).
- `target.Member(Target)`: one machine of the pool; its samples' `target` is the
  machine's own describe() plus `"pool"` (the pool's name) and `"machine"` (the
  machine's name in the pool), so every sample records which machine took it.
- `dispatch.members(target) -> list[Target]`: the machines a batch can use (a plain
  target is a pool of one).
- `dispatch.run_batch(target, tasks, strike=) -> list[Done]`: runs
  `Task(run, member)` callables concurrently (concurrent.futures threads), at most one
  per machine, each bound to a machine or to any free one; outcomes in the tasks'
  order; the quarantine rule (dispatch.py's docstring) takes a failing or repeatedly
  disturbed machine out and gives its task to another; `NoMachineLeft` (InfraError)
  when none is left.

Nothing here is a distributed engine: the threads drive their machines the way the
single-target code does (ssh, or QEMU on this host); docs/pool.md has the rest.
"""
