"""Maintenance commands for the book's authors (not imported by the chapters)."""
