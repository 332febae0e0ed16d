"""A page's text: decoding, parsing, visible text, main content (and the C tree walker)."""
