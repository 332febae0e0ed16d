"""Reports: the model, the JSONL/CSV/HTML formats, where a report goes."""
