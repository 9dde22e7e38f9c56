"""Bridges to the tools users already have: dask, xarray (and torch, planned)."""
