"""The admin API of ``warren api`` (docs/endpoints.md): endpoints as live data, kept in the store and applied to
RabbitMQ. ``service.py`` holds the operations (the CLI uses them too), ``app.py`` the HTTP routes."""
