"""Warren: warren."""
