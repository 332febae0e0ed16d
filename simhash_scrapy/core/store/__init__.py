"""The persistent store's file format (an SQLite file): rows, chunks, the WAL check."""
