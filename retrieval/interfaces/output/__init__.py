"""What the command line prints (``display``: tables that fit the terminal) and writes (``export``: json, jsonl,
csv, BibTeX, RIS)."""
