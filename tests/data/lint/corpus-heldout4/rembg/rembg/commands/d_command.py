import click

from ..bg import download_models


@click.command(name="d", help="download models")
@click.argument("models", nargs=-1)
def d_command(models) -> None:
    download_models(models)
