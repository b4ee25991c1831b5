"""Warren: broker."""
