import click


@click.command()
@click.option("--host", default="0.0.0.0", help="Host for the server to listen on.")
@click.option("--port", default=4000, help="Port to bind the server to.")
@click.option("--config", "-c", default=None, help="Path to the proxy configuration file")
@click.option("--detailed_debug", is_flag=True, default=False)
def run_server(host, port, config, detailed_debug):
    import uvicorn

    uvicorn.run("litellm.proxy.proxy_server:app", host=host, port=port)


if __name__ == "__main__":
    run_server()
