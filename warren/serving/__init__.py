"""Serving HTTP, as ``warren api``, the worker's metrics and ``warren receive`` all do: the runner that stops on a
signal (``server``) and the guard against clients that send their requests too slowly (``guard``)."""
