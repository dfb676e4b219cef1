"""The tables of memory.db and the migrations that bring an earlier release's file up to date."""
