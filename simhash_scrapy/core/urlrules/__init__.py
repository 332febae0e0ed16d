"""URL rules: the rewrite kinds and the learner."""
