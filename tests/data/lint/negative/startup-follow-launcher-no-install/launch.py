import subprocess
import sys

import webui


def check() -> None:
    subprocess.run([sys.executable, "-m", "pip", "check"], check=True)
    out = subprocess.check_output([sys.executable, "-m", "pip", "list", "--format=freeze"])
    print(out.decode().count("=="), "packages")


if __name__ == "__main__":
    check()
    webui.serve()
