"""Warren: consumers."""
