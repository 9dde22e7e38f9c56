"""Selections: normalize what a caller indexes with, project it onto the chunk grid."""
