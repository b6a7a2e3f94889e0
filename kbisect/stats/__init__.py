"""Statistics, standard library and numpy only: means and ratios, sequential rules, drift."""
