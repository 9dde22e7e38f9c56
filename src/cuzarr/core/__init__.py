"""Arrays, groups and the sync-over-async machinery."""
