"""The commands of the ``warren`` CLI, one module per command group."""
