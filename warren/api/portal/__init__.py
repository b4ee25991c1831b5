"""The tenants' endpoint portal: a page ``warren api`` serves at ``/portal`` for one tenant's browser."""
