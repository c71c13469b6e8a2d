"""A user's data: export, erasure, and the receivers run when the user changes or goes."""
