"""Codes and refresh tokens: rotation, redemption, grants."""
