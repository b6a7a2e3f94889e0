"""The ground floor: the command wrapper and its reaper, atomic files, paths, the clock,
progress lines, preflight rows, the pid lock, per-arch facts and the two exception roots."""
