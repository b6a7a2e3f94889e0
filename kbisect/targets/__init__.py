"""Where a built kernel runs the harness: the Target seam and one package per kind."""
