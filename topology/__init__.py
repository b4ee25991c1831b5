"""Warren's topology: configuration and the pure planner that turns it into RabbitMQ objects."""
