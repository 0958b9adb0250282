"""LiteLLM: one interface for 100+ LLM APIs."""


def run_server() -> None:
    from litellm.proxy.proxy_cli import run_server as _run

    _run()
