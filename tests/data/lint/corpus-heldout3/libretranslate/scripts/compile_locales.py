"""Compile the .po translation catalogues of the web UI into .mo files."""
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

for po in Path("libretranslate/locales").glob("*/LC_MESSAGES/messages.po"):
    with po.open("rb") as f:
        catalog = read_po(f)
    with po.with_suffix(".mo").open("wb") as f:
        write_mo(f, catalog)
