"""The settings table, its value parsers and the typed configs."""
