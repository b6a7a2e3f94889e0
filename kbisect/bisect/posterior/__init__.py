"""The posterior method: the commit graph, the likelihood, the posterior and its search."""
