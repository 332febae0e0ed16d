"""The block-permuted index (layout, queries, file format) and the one-edit key table."""
