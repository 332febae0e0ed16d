"""Text to fingerprints: tokens and weighted features, the simhash, the second simhash, exact digests, one-edit keys."""
