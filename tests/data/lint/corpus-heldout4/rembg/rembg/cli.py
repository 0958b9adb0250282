import click

from .commands.d_command import d_command
from .commands.s_command import s_command


@click.group()
def main() -> None:
    pass


main.add_command(d_command)
main.add_command(s_command)
