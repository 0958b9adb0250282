import os

workers = int(os.environ.get("LT_THREADS", 4))
timeout = 2400


def on_starting(server):
    from prometheus_client import multiprocess  # noqa: F401
